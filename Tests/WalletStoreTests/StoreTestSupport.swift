import Foundation
import GRDB
import Testing
import WalletRouting

@testable import WalletStore

/// The stores the shared suite runs against. PostgreSQL only when `POSTGRES_URL` names a server (scripts/test.sh
/// starts one); `PostgresWalletStoreTests` shows as skipped, with the reason, when it does not.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory
    case sqlite
    case postgres

    static var allCases: [StoreKind] {
        PostgresTestDatabase.url == nil ? [.memory, .sqlite] : [.memory, .sqlite, .postgres]
    }

    var testDescription: String { rawValue }
}

/// A store under test, with read access to its committed state (the `WalletStore` protocol has none).
struct StoreHarness: Sendable {
    let store: any WalletStore
    /// The SQLite file, when there is one.
    let path: String?

    func card(_ digitalCardId: String) async throws -> CardRecord? {
        switch store {
        case let store as InMemoryWalletStore: store.state.card(digitalCardId)
        case let store as SQLiteWalletStore: try await store.read { try $0.card(digitalCardId) }
        case let store as PostgresWalletStore:
            try await store.read { try await $0.cards([digitalCardId], lock: false)[digitalCardId] }
        default: fatalError("unexpected store \(type(of: store))")
        }
    }

    func transactions(_ digitalCardId: String, auxiliary: Bool? = nil, limit: Int = 100) async throws
        -> [TransactionRecord]
    {
        switch store {
        case let store as InMemoryWalletStore:
            store.state.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
        case let store as SQLiteWalletStore:
            try await store.read {
                try $0.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
            }
        case let store as PostgresWalletStore:
            try await store.read {
                try await $0.histories([
                    (key: HistoryKey(digitalCardId: digitalCardId, auxiliary: auxiliary), limit: limit)
                ])[0] ?? []
            }
        default: fatalError("unexpected store \(type(of: store))")
        }
    }

    func installation(_ installationId: String) async throws -> Installation? {
        switch store {
        case let store as InMemoryWalletStore: store.state.installations[installationId]
        case let store as SQLiteWalletStore: try await store.read { try $0.installation(installationId) }
        case let store as PostgresWalletStore: try await store.read { try await $0.installation(installationId) }
        default: fatalError("unexpected store \(type(of: store))")
        }
    }

    /// The store's note of `messageID`'s results as undelivered (`WalletStore.noteResultDelivery`), read from its
    /// table whether or not the message is still recorded.
    func undelivered(_ messageID: String) async throws -> UndeliveredResults? {
        switch store {
        case let store as InMemoryWalletStore: return store.undeliveredResults(messageID)
        case is SQLiteWalletStore:
            let queue = try DatabaseQueue(path: path!)
            defer { try? queue.close() }
            return try await queue.read { db in try UndeliveredResults.fetch(messageID, in: db) }
        case let store as PostgresWalletStore: return try await store.read { try await $0.undelivered(messageID) }
        default: fatalError("unexpected store \(type(of: store))")
        }
    }

    /// Routes one batch with the default router.
    @discardableResult
    func process(_ messages: [InboundMessage], at seconds: TimeInterval = 1_790_000_000) async throws
        -> [StoredDecision]
    {
        try await store.process(messages, router: NotificationRouter(), now: Date(timeIntervalSince1970: seconds))
    }
}

/// A fresh temporary directory, removed when `body` returns or throws.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("wallet-store-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// Runs `body` against a fresh store of `kind` (SQLite in a fresh temporary file, PostgreSQL in a fresh schema;
/// deleted afterwards).
func withStore(_ kind: StoreKind, _ body: (StoreHarness) async throws -> Void) async throws {
    switch kind {
    case .postgres:
        try await PostgresTestDatabase.withSchema { location in
            let store = try PostgresTestDatabase.store(location)
            do {
                try await body(StoreHarness(store: store, path: nil))
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    case .memory:
        try await body(StoreHarness(store: InMemoryWalletStore(), path: nil))
    case .sqlite:
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try WalletStores.open(.sqlite(path: path))
            do {
                try await body(StoreHarness(store: store, path: path))
            } catch {
                await store.close()
                throw error
            }
            await store.close()
        }
    }
}

// MARK: - Messages (CONTRACT.md §3-§7 payloads)

enum Messages {
    static func message(_ json: String, id: String?, type: String? = nil, replyTo: String? = nil)
        -> InboundMessage
    {
        InboundMessage(
            body: Array(json.utf8),
            properties: InboundProperties(
                messageID: id, correlationID: id.map { "corr-\($0)" }, replyTo: replyTo, type: type,
                traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
    }

    /// A CPS card operation with one server message.
    static func cps(
        _ digitalCardId: String, code: String, id: String?, tokenizedCardId: String? = "TK-1",
        keyType: String? = nil, replyTo: String? = nil
    ) -> InboundMessage {
        var fields = [#""sender":"CPS""#, #""digitalCardId":"\#(digitalCardId)""#]
        if let tokenizedCardId { fields.append(#""tokenizedCardId":"\#(tokenizedCardId)""#) }
        if let keyType { fields.append(#""keyType":"\#(keyType)""#) }
        fields.append(
            #""serverMessage":{"code":"\#(code)","text":"Card update","severity":"info","params":[]}"#)
        return message("{\(fields.joined(separator: ","))}", id: id, replyTo: replyTo)
    }

    static func install(_ digitalCardId: String, id: String?, keyType: String? = nil) -> InboundMessage {
        cps(digitalCardId, code: "CBP.info.tokenProvisioned", id: id, keyType: keyType)
    }

    static func suspend(_ digitalCardId: String, id: String?) -> InboundMessage {
        cps(digitalCardId, code: "CBP.info.tokenSuspended", id: id)
    }

    static func resume(_ digitalCardId: String, id: String?) -> InboundMessage {
        cps(digitalCardId, code: "CBP.info.tokenResumed", id: id)
    }

    /// A TNS notification embedding one record.
    static func tns(
        _ digitalCardId: String, recordId: String, date: String = "2026-11-20T10:15:00Z", amount: String = "12.50",
        auxiliary: Bool = false, id: String?
    ) -> InboundMessage {
        message(
            #"""
            {"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(digitalCardId)",
             "transaction":{"id":"\#(recordId)","date":"\#(date)","status":"approved","type":"purchase",
                            "currencyCode":"EUR","amount":\#(amount),"displayAmount":"\#(amount)","merchantName":"Cafe",
                            "merchantType":"5814","merchantPostalCode":"75001","terminalID":"TRM1","merchantID":"M1",
                            "isAuxiliaryTransaction":\#(auxiliary)}}
            """#, id: id)
    }

    /// An MG replenishment request.
    static func mg(_ digitalCardId: String, id: String?) -> InboundMessage {
        message(
            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(digitalCardId)"}"#,
            id: id)
    }

    static func registerInstallation(_ installationId: String, tags: [String], id: String?) -> InboundMessage {
        let tagList = tags.map { "\"\($0)\"" }.joined(separator: ",")
        return message(
            #"{"installationId":"\#(installationId)","platform":"APNS","pushChannel":"a1b2c3d4","tags":[\#(tagList)]}"#,
            id: id, type: NotificationRouter.deviceInstallationType)
    }

    static func deleteInstallation(_ installationId: String, id: String?) -> InboundMessage {
        message(
            #"{"installationId":"\#(installationId)"}"#, id: id,
            type: NotificationRouter.deviceInstallationDeletedType)
    }

    /// No sender, no action: acknowledged, nothing published (§6).
    static func ignored(id: String?) -> InboundMessage {
        message(#"{"aps":{"alert":"Hello"}}"#, id: id)
    }

    /// Not JSON: rejected and dead-lettered (§8).
    static func notJSON(id: String?) -> InboundMessage {
        message(#"{"sender":"CPS","#, id: id)
    }
}

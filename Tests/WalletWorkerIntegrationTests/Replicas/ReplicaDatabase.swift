import BrokerTestSupport
import Foundation
import Logging
import PostgresNIO
import TestSupport
import WalletStore

/// A fresh PostgreSQL database for one multi-replica test, on the server of `POSTGRES_URL` (scripts/test.sh
/// starts a private one and sets it; the role needs CREATEDB). The workers migrate it themselves; the test reads
/// the store's tables afterwards. Dropped at the end.
// swift-format-ignore: UseSynthesizedInitializer
struct ReplicaDatabase: Sendable {
    static var serverURL: String? {
        ProcessInfo.processInfo.environment["POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static var isConfigured: Bool { serverURL != nil }

    static let logger = Logger(label: "multi-replica-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    let name: String
    /// `--store` for the workers: `POSTGRES_URL` with this database.
    let storeURL: String
    private let server: PostgresLocation

    // Private, unlike the synthesized one: a database exists only inside `with`, which drops it.
    private init(name: String, storeURL: String, server: PostgresLocation) {
        self.name = name
        self.storeURL = storeURL
        self.server = server
    }

    /// Creates the database; runs `body`; drops it (also when `body` throws).
    static func with<T>(_ purpose: String, _ body: (ReplicaDatabase) async throws -> T) async throws -> T {
        guard let serverURL, var components = URLComponents(string: serverURL) else {
            throw BrokerTestError("POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it")
        }
        let server = try PostgresLocation(parsing: serverURL)
        let name = "wnw_\(purpose)_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        components.path = "/\(name)"
        guard let storeURL = components.string else {
            throw BrokerTestError("cannot build a store URL from POSTGRES_URL")
        }
        let database = ReplicaDatabase(name: name, storeURL: storeURL, server: server)
        // A plain identifier (letters, digits, _): safe to write into the statement.
        try await database.withConnection(to: server.database) {
            try await $0.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(database))
        } catch {
            result = .failure(error)
        }
        _ = try? await database.withConnection(to: server.database) {
            try await $0.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
        }
        return try result.get()
    }

    /// A connection of the test's own (no TLS: the test server is on loopback).
    @discardableResult
    func withConnection<T>(to database: String? = nil, _ body: (PostgresConnection) async throws -> T) async throws -> T
    {
        let configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.user, password: server.password,
            database: database ?? name, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Self.logger)
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// The store URL of this database through `relay`, a `FaultyRelay` in front of its server (which the caller
    /// keeps, and closes).
    func store(through relay: FaultyRelay) throws -> StoreLocation {
        guard var components = URLComponents(string: storeURL) else { throw BrokerTestError("not a URL: \(storeURL)") }
        components.host = "127.0.0.1"
        components.port = relay.port
        guard let url = components.string else { throw BrokerTestError("cannot build a store URL through the relay") }
        return try StoreLocation(parsing: url)
    }

    /// A relay in front of this database's server.
    func relay() throws -> FaultyRelay {
        try FaultyRelay(upstreamHost: server.host, upstreamPort: server.port)
    }

    /// Makes the database read-only (`default_transaction_read_only`), as a standby answering as the primary after
    /// a failover is, or writable again, and ends the sessions already connected to it so that every new one gets
    /// the setting (the worker's pool reconnects).
    func setReadOnly(_ readOnly: Bool) async throws {
        try await withConnection(to: server.database) { connection in
            let setting = readOnly ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only"
            try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(name) \(setting)"), logger: Self.logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)'"),
                logger: Self.logger)
        }
    }

    // MARK: - The store's tables (the names and columns of PostgresSchema's migrations)

    struct Card: Sendable, Equatable, CustomStringConvertible {
        var state: String
        var tokenizedCardId: String?
        var keyType: String
        var paymentsLeft: Int?
        var description: String {
            "\(state) \(tokenizedCardId ?? "-") \(keyType) keys:\(paymentsLeft.map(String.init) ?? "none")"
        }
    }

    struct Contents: Sendable {
        var processedIDs: [String] = []
        var cards: [String: Card] = [:]
        /// Record ids per card, newest first (ties: the later stored first), one entry per row.
        var records: [String: [String]] = [:]
    }

    func contents() async throws -> Contents {
        try await withConnection { connection in
            var contents = Contents()
            for try await id in try await connection.query(
                "SELECT message_id FROM processed_messages", logger: Self.logger
            )
            .decode(String.self) {
                contents.processedIDs.append(id)
            }
            for try await (card, state, tokenized, keyType, paymentsLeft) in try await connection.query(
                "SELECT digital_card_id, state, tokenized_card_id, key_type, payments_left FROM cards",
                logger: Self.logger
            ).decode((String, String, String?, String, Int?).self) {
                contents.cards[card] = Card(
                    state: state, tokenizedCardId: tokenized, keyType: keyType, paymentsLeft: paymentsLeft)
            }
            for try await (card, record) in try await connection.query(
                "SELECT digital_card_id, record_id FROM transactions ORDER BY digital_card_id, instant DESC, stored_sequence DESC",
                logger: Self.logger
            ).decode((String, String).self) {
                contents.records[card, default: []].append(record)
            }
            return contents
        }
    }
}

import BrokerTestSupport
import Foundation
import Logging
import PostgresNIO
import PostgresTestSupport
import TestSupport
import WalletStore

/// A fresh PostgreSQL database for one multi-replica test, on the server of `POSTGRES_URL` (scripts/test.sh
/// starts a private one and sets it; the role needs CREATEDB). The workers migrate it themselves; the test reads
/// the store's tables afterwards. Dropped at the end.
struct ReplicaDatabase: Sendable {
    static var isConfigured: Bool { PostgresTestServer.isConfigured }

    static var logger: Logger { PostgresTestServer.logger }

    let database: PostgresTestDatabaseName
    /// `--store` for the workers: `POSTGRES_URL` with this database.
    let storeURL: String
    var name: String { database.name }

    /// Creates the database; runs `body`; drops it (also when `body` throws).
    static func with<T>(_ purpose: String, _ body: (ReplicaDatabase) async throws -> T) async throws -> T {
        guard let serverURL = PostgresTestServer.url, var components = URLComponents(string: serverURL) else {
            throw BrokerTestError(PostgresTestServer.skipReason)
        }
        return try await PostgresTestServer.withDatabase(purpose) { database in
            components.path = "/\(database.name)"
            guard let storeURL = components.string else {
                throw BrokerTestError("cannot build a store URL from POSTGRES_URL")
            }
            return try await body(ReplicaDatabase(database: database, storeURL: storeURL))
        }
    }

    /// A connection of the test's own to this database (or `database`).
    @discardableResult
    func withConnection<T>(to database: String? = nil, _ body: (PostgresConnection) async throws -> T) async throws -> T
    {
        try await PostgresTestServer.withAdminConnection(database: database ?? name, body)
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
        let server = try PostgresTestServer.location()
        return try FaultyRelay(upstreamHost: server.host, upstreamPort: server.port)
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

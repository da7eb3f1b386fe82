import Foundation
import Logging
import PostgresNIO
import WalletStore

/// The PostgreSQL server of the tests: `POSTGRES_URL`, a role that may create schemas and databases (scripts/test.sh
/// starts a private server and sets it). The store tests work in a schema each, the worker tests in a database each;
/// both reach the server through here, with the same connection and the same failure report.
public enum PostgresTestServer {
    public static var url: String? {
        ProcessInfo.processInfo.environment["POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    public static var isConfigured: Bool { url != nil }

    public static let skipReason = "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"

    public static let logger = Logger(label: "wallet-postgres-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The server's location, with another database or schema when given.
    public static func location(database: String? = nil, schema: String? = nil) throws -> PostgresLocation {
        guard let url else { throw PostgresTestFailure(skipReason) }
        var location = try PostgresLocation(parsing: url)
        if let database { location.database = database }
        location.schema = schema
        return location
    }

    /// A failure of the tests' own connection, said whole: PostgresNIO's `PSQLError` describes itself as "Generic
    /// description to prevent accidental leakage", which told a failed CI run nothing (the tests' server holds no
    /// secret). `doing` says which step failed.
    public struct AdminFailure: Error, CustomStringConvertible {
        public var doing: String
        public var underlying: any Error
        public var description: String {
            "the tests' own PostgreSQL connection, \(doing): \(String(reflecting: underlying))"
        }
    }

    /// A connection of the test's own (outside any store; no TLS: the test server is on loopback), to `database`
    /// (the server's own by default) with `schema` first on its search path when given.
    @discardableResult
    public static func withAdminConnection<T>(
        database: String? = nil, schema: String? = nil, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let location = try location(database: database)
        let configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.user, password: location.password,
            database: location.database, tls: .disable)
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        } catch {
            throw AdminFailure(doing: "connecting", underlying: error)
        }
        do {
            if let schema {
                try await connection.query(PostgresQuery(unsafeSQL: "SET search_path TO \(schema)"), logger: logger)
            }
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch let error as PSQLError {
            try? await connection.close()
            throw AdminFailure(doing: "a statement of the test", underlying: error)
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Creates a database of its own, runs `body` with it, and drops it (also when `body` throws).
    public static func withDatabase<T>(_ purpose: String, _ body: (PostgresTestDatabaseName) async throws -> T)
        async throws -> T
    {
        // A plain identifier (letters, digits, _): safe to write into the statement.
        let name = PostgresTestDatabaseName(
            "wnw_\(purpose)_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))")
        try await withAdminConnection {
            try await $0.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name.name)"), logger: logger)
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(name))
        } catch {
            result = .failure(error)
        }
        _ = try? await withAdminConnection {
            try await $0.query(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name.name) WITH (FORCE)"), logger: logger)
        }
        return try result.get()
    }

    /// Makes `database` read-only (`default_transaction_read_only`), as a standby answering as the primary after a
    /// failover is, or writable again, and ends the sessions already connected to it so that every new one gets the
    /// setting (a store's pool reconnects).
    public static func setReadOnly(_ readOnly: Bool, database: PostgresTestDatabaseName) async throws {
        try await withAdminConnection { connection in
            let setting = readOnly ? "SET default_transaction_read_only = on" : "RESET default_transaction_read_only"
            try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER DATABASE \(database.name) \(setting)"), logger: logger)
            try await connection.query(
                PostgresQuery(
                    unsafeSQL:
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database.name)'"),
                logger: logger)
        }
    }
}

/// A database `PostgresTestServer.withDatabase` created: its name, and its location on the server.
public struct PostgresTestDatabaseName: Sendable {
    public let name: String
    init(_ name: String) { self.name = name }

    public func location(schema: String? = nil) throws -> PostgresLocation {
        try PostgresTestServer.location(database: name, schema: schema)
    }
}

public struct PostgresTestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

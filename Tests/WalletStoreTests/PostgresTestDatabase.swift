import Foundation
import Logging
import PostgresNIO
import Testing

@testable import WalletStore

/// The PostgreSQL server of the tests: `POSTGRES_URL`, a role that may create schemas (scripts/test.sh starts a
/// private server and sets it). Each test works in a schema of its own, so tests run in parallel.
enum PostgresTestDatabase {
    static var url: String? {
        ProcessInfo.processInfo.environment["POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static let skipReason: Comment = "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"

    static let logger = Logger(label: "wallet-store-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    /// The server's location with another database, password or port (for the failure tests).
    static func location(schema: String? = nil) throws -> PostgresLocation {
        guard let url else { throw PostgresTestError("POSTGRES_URL is not set") }
        var location = try PostgresLocation(parsing: url)
        location.schema = schema
        return location
    }

    /// A store on `location`: a small pool (many tests run at once) and the given statement timeout.
    static func store(_ location: PostgresLocation, statementTimeout: Duration = .seconds(5))
        throws -> PostgresWalletStore
    {
        var configuration = PostgresWalletStore.Configuration(location: location)
        configuration.poolSize = 2
        configuration.statementTimeout = statementTimeout
        return try PostgresWalletStore(configuration: configuration)
    }

    /// Runs `body` with a location in a fresh schema (created by the store's migration), dropped afterwards.
    static func withSchema<T>(_ body: (PostgresLocation) async throws -> T) async throws -> T {
        let schema = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let location = try location(schema: schema)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(location))
        } catch {
            result = .failure(error)
        }
        try await withAdminConnection { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"), logger: logger)
        }
        return try result.get()
    }

    /// A failure of the tests' own connection, said whole: PostgresNIO's `PSQLError` describes itself as "Generic
    /// description to prevent accidental leakage", which told a failed CI run nothing (the tests' server holds no
    /// secret). `doing` says which statement or step failed.
    struct AdminFailure: Error, CustomStringConvertible {
        var doing: String
        var underlying: any Error
        var description: String { "the tests' own PostgreSQL connection, \(doing): \(String(reflecting: underlying))" }
    }

    /// A connection of the test's own (outside any store), e.g. to hold a lock or read a table.
    @discardableResult
    static func withAdminConnection<T>(schema: String? = nil, _ body: (PostgresConnection) async throws -> T)
        async throws -> T
    {
        let settings = PostgresConnectionSettings(
            PostgresWalletStore.Configuration(location: try location(schema: schema)))
        let connection: PostgresConnection
        do {
            connection = try await settings.connect(logger: logger)
        } catch {
            throw AdminFailure(doing: "connecting", underlying: error)
        }
        do {
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
}

struct PostgresTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

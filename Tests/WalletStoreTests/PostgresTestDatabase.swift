import Foundation
import Logging
import PostgresNIO
import PostgresTestSupport
import Testing

@testable import WalletStore

/// The store tests' view of the tests' PostgreSQL server (`PostgresTestServer`): each test works in a schema of its
/// own, so tests run in parallel.
enum PostgresTestDatabase {
    static var url: String? { PostgresTestServer.url }

    static let skipReason = Comment(rawValue: PostgresTestServer.skipReason)

    static var logger: Logger { PostgresTestServer.logger }

    /// The server's location with the given schema.
    static func location(schema: String? = nil) throws -> PostgresLocation {
        try PostgresTestServer.location(schema: schema)
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

    /// A connection of the test's own (outside any store), e.g. to hold a lock or read a table.
    @discardableResult
    static func withAdminConnection<T>(schema: String? = nil, _ body: (PostgresConnection) async throws -> T)
        async throws -> T
    {
        try await PostgresTestServer.withAdminConnection(schema: schema, body)
    }

    /// The rows `query` returns, on a connection of the test's own.
    static func rowCount(_ query: PostgresQuery, schema: String? = nil) async throws -> Int {
        try await withAdminConnection(schema: schema) { connection in
            var count = 0
            for try await _ in try await connection.query(query, logger: logger) { count += 1 }
            return count
        }
    }
}

struct PostgresTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

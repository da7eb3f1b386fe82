import Foundation
import PostgresNIO
import PostgresTestSupport
import Testing
import WalletRouting

@testable import WalletStore

/// Issue 38: PostgreSQL records a message's results as one value (schema v5) instead of a row per result, in two
/// steps. v5 adds the column, and this build writes both while a build before it may run beside (such a build
/// replays from the rows); v6 retires the rows, applied to a database with data only by `wallet-worker migrate
/// --retire-older-builds` and not while a session of such a build is connected, after which this build writes the
/// value alone and an older build's record fails. v7, retired with it, compresses the value (a build before it cannot
/// read one): written compressed only from then on. In a database of its own: the older build's session would hold
/// back the other tests' migrations.
@Suite("Result rows retired in two steps")
struct ResultRowsRolloutTests {
    private static let router = NotificationRouter()

    @Test(.enabled(if: PostgresTestDatabase.url != nil, PostgresTestDatabase.skipReason), .timeLimit(.minutes(1)))
    func postgresResultsMoveIntoTheRecordInTwoSteps() async throws {
        try await PostgresTestServer.withDatabase("result_rows") { database in
            let location = try database.location()
            let logger = PostgresTestDatabase.logger
            try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
                try await PostgresSchema.migrate(
                    on: connection, location: location, timeout: .seconds(30), logger: logger, through: 4)
            }
            var configuration = PostgresWalletStore.Configuration(location: location)
            configuration.poolSize = 1
            configuration.schemaMode = .migrateWithoutIndexBuilds  // a worker's start
            let first = [
                Messages.install("DC-1", id: "i-1"), Messages.tns("DC-1", recordId: "R-1", id: "t-1"),
            ]
            let started = try PostgresWalletStore(configuration: configuration)
            let (firstDecisions, secondDecision) = try await PostgresTestServer.withAdminConnection(
                database: database.name
            ) { olderReplica in
                // A replica of a build before v5, connected while the new one starts and `migrate` runs.
                try await olderReplica.query("SET application_name = 'wallet-worker'", logger: logger)

                let decisions = try await started.process(first, router: Self.router, now: Date())
                let atStart = try await WalletStores.schemaStatus(.postgres(location))
                #expect(
                    atStart.pending == ["v6", "v7"] && atStart.isUsable, "a worker's start leaves v6 and v7: \(atStart)"
                )
                #expect(try await Self.resultRows("t-1", database) == decisions[1].decision.results.count)
                #expect(try await Self.hasResultsValue("t-1", database))
                #expect(try await Self.resultsEncoding("t-1", database) == RecordedResultsEncoding.uncompressed)
                // t-1 as a build before v5 records it: its rows, no value.
                try await olderReplica.query(
                    "UPDATE processed_messages SET results = NULL WHERE message_id = 't-1'", logger: logger)

                let (_, waiting) = try await WalletStores.migrate(.postgres(location), retiringOlderBuilds: true)
                #expect(waiting.pending == ["v6", "v7"], "v6 and v7 wait for the older replica: \(waiting)")
                let second = try await started.process(
                    [Messages.tns("DC-1", recordId: "R-2", id: "t-2")], router: Self.router, now: Date())
                // The older replica goes. Its name goes first, seen by the next transaction on the server: a closed
                // client's backend leaves `pg_stat_activity` only some time after the close returns.
                try await olderReplica.query("SET application_name = 'gone'", logger: logger)
                return (decisions, second[0])
            }
            #expect(firstDecisions[1].decision.results.isEmpty == false)

            // A plain migrate (a deploy's Job) still leaves v6 and v7 to the operator's word.
            let (_, plain) = try await WalletStores.migrate(.postgres(location))
            #expect(plain.pending == ["v6", "v7"], "\(plain)")
            #expect(plain.description.contains("--retire-older-builds"), "\(plain)")
            let (_, retired) = try await WalletStores.migrate(.postgres(location), retiringOlderBuilds: true)
            #expect(retired.isCurrent, "\(retired)")
            // A record as a build before v5 writes it now breaks the check, an error that stops such a build.
            let olderRecord = await #expect(throws: PostgresTestServer.AdminFailure.self) {
                try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
                    try await connection.query(
                        """
                        INSERT INTO processed_messages (message_id, recorded_at, outcome)
                        VALUES ('older', now(), 'processed')
                        """, logger: logger)
                }
            }
            let violation = try #require(olderRecord?.underlying as? PSQLError)
            #expect(violation.serverInfo?[.sqlState] == "23514")
            #expect(StoreError.postgres(violation, at: location).kind == .permanent)

            // A replica that started before v6 and v7 writes the rows and an uncompressed value until it restarts.
            let third = try await started.process(
                [Messages.tns("DC-1", recordId: "R-3", id: "t-3")], router: Self.router, now: Date())
            await started.close()
            #expect(try await Self.resultRows("t-3", database) == third[0].decision.results.count)
            #expect(try await Self.resultsEncoding("t-3", database) == RecordedResultsEncoding.uncompressed)

            // One that starts after it writes the value alone, and replays every kind of record the same.
            let restarted = try PostgresWalletStore(configuration: configuration)
            let replays = try await restarted.process(
                [
                    Messages.install("DC-1", id: "i-1"), Messages.tns("DC-1", recordId: "R-1", id: "t-1"),
                    Messages.tns("DC-1", recordId: "R-2", id: "t-2"), Messages.tns("DC-1", recordId: "R-3", id: "t-3"),
                    Messages.tns("DC-1", recordId: "R-4", id: "t-4"),
                ], router: Self.router, now: Date())
            await restarted.close()
            #expect(replays.map(\.isReplay) == [true, true, true, true, false])
            #expect(replays[0].decision.results == firstDecisions[0].decision.results)
            #expect(replays[1].decision.results == firstDecisions[1].decision.results, "replayed from the rows")
            #expect(replays[2].decision.results == secondDecision.decision.results)
            #expect(replays[3].decision.results == third[0].decision.results)
            #expect(!replays[4].isReplay && !replays[4].decision.results.isEmpty)
            #expect(try await Self.resultRows("t-4", database) == 0)
            #expect(try await Self.resultsEncoding("t-4", database) == RecordedResultsEncoding.compressed)
        }
    }

    /// Which sessions count as a build older than a version: by their application name, on this database only.
    @Test(.enabled(if: PostgresTestDatabase.url != nil, PostgresTestDatabase.skipReason))
    func postgresOlderBuildsAreToldApartByTheirApplicationName() async throws {
        try await PostgresTestServer.withDatabase("older_sessions") { database in
            let names = [
                "wallet-worker", "wallet-worker v4", "wallet-worker v5", "wallet-worker v6", "wallet-worker vX",
                "wallet-worker v", "wallet-worker v4 ", "psql", PostgresSchema.applicationName,
            ]
            // An older build's session on another database does not count either. (A database of its own too: on
            // the server's own, where the other store tests have their schemas, it would hold back their retirements.)
            let found = try await PostgresTestServer.withDatabase("older_elsewhere") { other in
                try await PostgresTestServer.withAdminConnection(database: other.name) { elsewhere in
                    try await elsewhere.query(
                        "SET application_name = 'wallet-worker'", logger: PostgresTestDatabase.logger)
                    return try await Self.withSessions(named: names, database: database) {
                        try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
                            try await PostgresSchema.olderBuildSessions(
                                below: 5, on: connection, logger: PostgresTestDatabase.logger)
                        }
                    }
                }
            }
            // This build's own sessions (the last name) never count.
            #expect(
                found.map { $0.prefix { $0 != "(" } }.sorted() == ["wallet-worker ", "wallet-worker v4 "], "\(found)")
        }
    }

    /// Runs `body` while a session of the test's own is connected to `database` under each name.
    private static func withSessions<T>(
        named names: ArraySlice<String>, database: PostgresTestDatabaseName, _ body: () async throws -> T
    ) async throws -> T {
        guard let name = names.first else { return try await body() }
        return try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
            try await connection.query(
                PostgresQuery(unsafeSQL: "SET application_name = '\(name)'"), logger: PostgresTestDatabase.logger)
            return try await withSessions(named: names.dropFirst(), database: database, body)
        }
    }

    private static func withSessions<T>(
        named names: [String], database: PostgresTestDatabaseName, _ body: () async throws -> T
    ) async throws -> T {
        try await withSessions(named: names[...], database: database, body)
    }

    private static func resultRows(_ messageID: String, _ database: PostgresTestDatabaseName) async throws -> Int {
        try await rows("SELECT 1 FROM processed_results WHERE message_id = \(messageID)", database)
    }

    private static func hasResultsValue(_ messageID: String, _ database: PostgresTestDatabaseName) async throws
        -> Bool
    {
        try await rows(
            "SELECT 1 FROM processed_messages WHERE message_id = \(messageID) AND results IS NOT NULL", database) == 1
    }

    /// The first byte of a record's results value: its encoding's version.
    private static func resultsEncoding(_ messageID: String, _ database: PostgresTestDatabaseName) async throws
        -> UInt8?
    {
        try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
            for try await row in try await connection.query(
                "SELECT get_byte(results, 0) FROM processed_messages WHERE message_id = \(messageID)",
                logger: PostgresTestDatabase.logger)
            {
                return UInt8(try row.decode(Int32.self))
            }
            return nil
        }
    }

    private static func rows(_ query: PostgresQuery, _ database: PostgresTestDatabaseName) async throws -> Int {
        try await PostgresTestServer.withAdminConnection(database: database.name) { connection in
            var count = 0
            for try await _ in try await connection.query(query, logger: PostgresTestDatabase.logger) { count += 1 }
            return count
        }
    }
}

import Foundation
import GRDB
import PostgresNIO
import Testing
import WalletRouting

@testable import WalletStore

/// `wallet-worker migrate` and `run --no-migrate` (issue 15, part 5): a store opened with `.requireCurrent`
/// changes nothing and refuses a schema that is not exactly this build's, naming the command that fixes it;
/// `WalletStores.migrate` brings it up to date and reports before and after.
@Suite("Schema migrations run apart from the worker")
struct SchemaMigrationTests {
    private static let router = NotificationRouter()

    private static func requireCurrent(sqlite path: String) throws -> any WalletStore {
        try WalletStores.open(.sqlite(path: path), schemaMode: .requireCurrent)
    }

    @Test func requireCurrentRefusesAMissingSQLiteFileAndCreatesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let error = #expect(throws: StoreError.self) { try Self.requireCurrent(sqlite: path) }
            #expect(error?.kind == .permanent)
            #expect(error?.message.contains("wallet-worker migrate --store sqlite:\(path)") == true)
            let status = try SQLiteWalletStore.schemaStatus(path: path)
            #expect(status.applied == [])
            #expect(!FileManager.default.fileExists(atPath: path), "neither the open nor the status created it")
        }
    }

    @Test func aSQLiteFileBehindThisBuildIsRefusedUnchangedThenMigrated() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            // A file as the build before v2 (and v3) left it.
            let old = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator.migrate(old, upTo: "v1")
            try old.close()

            let behind = try SQLiteWalletStore.schemaStatus(path: path)
            #expect(behind.applied == ["v1"] && behind.pending == ["v2", "v3", "v4", "v5"] && !behind.isCurrent)
            let error = #expect(throws: StoreError.self) { try Self.requireCurrent(sqlite: path) }
            #expect(error?.kind == .permanent)
            #expect(error?.message.contains("missing: v2, v3, v4, v5") == true, "\(String(describing: error))")
            #expect(error?.message.contains("wallet-worker migrate") == true)
            let afterRefusal = try SQLiteWalletStore.schemaStatus(path: path)
            #expect(afterRefusal == behind, "refusing changed nothing")

            let (before, after) = try await WalletStores.migrate(.sqlite(path: path))
            #expect(before == behind)
            #expect(after.isCurrent && after.applied == ["v1", "v2", "v3", "v4", "v5"])

            let store = try Self.requireCurrent(sqlite: path)
            let decisions = try await store.process(
                [Messages.ignored(id: "after-migrate")], router: Self.router, now: Date())
            #expect(decisions.count == 1)
            await store.close()
        }
    }

    @Test func aSQLiteFileFromANewerBuildIsRefusedByRequireCurrentAndByMigrate() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            _ = try await WalletStores.migrate(.sqlite(path: path))
            let other = try DatabaseQueue(path: path)
            try await other.write {
                try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-future')")
            }
            try other.close()

            let newer = try SQLiteWalletStore.schemaStatus(path: path)
            #expect(newer.unknown == ["v99-future"])
            let refused = #expect(throws: StoreError.self) { try Self.requireCurrent(sqlite: path) }
            #expect(refused?.message.contains("run a newer worker") == true)
            let notMigrated = await #expect(throws: StoreError.self) {
                try await WalletStores.migrate(.sqlite(path: path))
            }
            #expect(notMigrated?.message.contains("newer than this build") == true)
        }
    }

    @Test(.enabled(if: PostgresTestDatabase.url != nil, PostgresTestDatabase.skipReason))
    func postgresRequireCurrentCreatesNothingAndMigrateMakesItCurrent() async throws {
        try await PostgresTestDatabase.withSchema { location in
            var configuration = PostgresWalletStore.Configuration(location: location)
            configuration.poolSize = 1
            configuration.schemaMode = .requireCurrent
            let refused = try PostgresWalletStore(configuration: configuration)
            let error = await #expect(throws: StoreError.self) {
                try await refused.process([Messages.ignored(id: "m1")], router: Self.router, now: Date())
            }
            await refused.close()
            #expect(error?.kind == .permanent)
            #expect(
                error?.message.contains("none (this build's migrations: v1, v2, v3, v4, v5, v6, v7)") == true,
                "\(String(describing: error))")
            #expect(error?.message.contains("wallet-worker migrate --store postgres://") == true)
            #expect(error?.message.contains(":\(location.password ?? "")@") == false, "the password is not shown")
            #expect(error?.message.contains(":***@") == true)
            // Not even the schema was created.
            let schemas = try await PostgresTestDatabase.rowCount(
                "SELECT 1 FROM pg_namespace WHERE nspname = \(location.schema ?? "")")
            #expect(schemas == 0)

            let (before, after) = try await WalletStores.migrate(.postgres(location))
            #expect(before.applied == [] && before.pending == ["v1", "v2", "v3", "v4", "v5", "v6", "v7"])
            #expect(after.isCurrent && after.applied == ["v1", "v2", "v3", "v4", "v5", "v6", "v7"])

            let store = try PostgresWalletStore(configuration: configuration)
            let decisions = try await store.process([Messages.ignored(id: "m1")], router: Self.router, now: Date())
            #expect(decisions.count == 1)
            await store.close()

            try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { connection in
                try await connection.query(
                    "INSERT INTO wallet_schema_migrations (version, name) VALUES (99, 'from the future')",
                    logger: PostgresTestDatabase.logger)
            }
            let newer = try await WalletStores.schemaStatus(.postgres(location))
            #expect(newer.unknown == ["v99"] && !newer.isCurrent)
            let stillCurrent = try PostgresWalletStore(configuration: configuration)
            let refusedNewer = await #expect(throws: StoreError.self) { try await stillCurrent.prepare() }
            await stillCurrent.close()
            #expect(refusedNewer?.message.contains("run a newer worker") == true)
        }
    }

    /// v4 and v5: the result bodies and the results values the server compresses (over about 2 kB) are compressed
    /// with lz4, on a database an older build left as on a new one; on a server without lz4 they change nothing.
    /// (Debian's PostgreSQL 15, which the tests run on, has lz4.) A database without v4 is usable by this build
    /// (only `migrate --check` says so); one without v5 is not.
    @Test(.enabled(if: PostgresTestDatabase.url != nil, PostgresTestDatabase.skipReason))
    func postgresLongResultBodiesAreCompressedWithLZ4() async throws {
        try await PostgresTestDatabase.withSchema { location in
            let logger = PostgresTestDatabase.logger
            let hasLZ4 =
                try await PostgresTestDatabase.rowCount(
                    "SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)") == 1
            try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { connection in
                try await PostgresSchema.migrate(
                    on: connection, location: location, timeout: .seconds(30), logger: logger, through: 3)
            }
            #expect(try await Self.bodyCompression(location) == "", "v3 leaves the server's default")
            let before = try await WalletStores.schemaStatus(.postgres(location))
            #expect(
                before.pending == ["v4", "v5", "v6", "v7"] && before.pendingRequired == ["v5"] && !before.isUsable,
                "\(before)")
            // v6 and v7 wait for `--retire-older-builds`: until v7 the results value is written uncompressed.
            let (_, after) = try await WalletStores.migrate(.postgres(location))
            #expect(after.pending == ["v6", "v7"] && after.isUsable, "\(after)")
            #expect(try await Self.bodyCompression(location) == (hasLZ4 ? "l" : ""))
            #expect(
                try await Self.bodyCompression(location, column: "processed_messages.results") == (hasLZ4 ? "l" : ""))
            guard hasLZ4 else { return }

            // Ten records make a TNS result of about 3 kB: the last one's body is stored compressed.
            var configuration = PostgresWalletStore.Configuration(location: location)
            configuration.poolSize = 1
            let store = try PostgresWalletStore(configuration: configuration)
            let messages =
                [Messages.install("DC-1", id: "install")]
                + (1...10).map { Messages.tns("DC-1", recordId: "R-\($0)", id: "tns-\($0)") }
            _ = try await store.process(messages, router: Self.router, now: Date())
            await store.close()
            let stored = try await Self.storedResults("tns-10", location)
            #expect(stored.count == 1 && stored[0].0 == "lz4" && stored[0].1 > 2_500, "\(stored)")

            // From v7 the worker compresses the value itself: a quarter of the bytes, too few for the server's.
            let (_, retired) = try await WalletStores.migrate(.postgres(location), retiringOlderBuilds: true)
            #expect(retired.isCurrent, "\(retired)")
            let restarted = try PostgresWalletStore(configuration: configuration)
            _ = try await restarted.process(
                [Messages.tns("DC-1", recordId: "R-11", id: "tns-11")], router: Self.router, now: Date())
            await restarted.close()
            let compressed = try await Self.storedResults("tns-11", location)
            #expect(
                compressed.count == 1 && compressed[0].0 == nil && compressed[0].1 * 3 < stored[0].1, "\(compressed)")
        }
    }

    /// How the server stores a record's results value, and its length in bytes.
    private static func storedResults(_ messageID: String, _ location: PostgresLocation) async throws
        -> [(String?, Int)]
    {
        try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { connection in
            var stored: [(String?, Int)] = []
            for try await row in try await connection.query(
                """
                SELECT pg_column_compression(results), octet_length(results) FROM processed_messages
                WHERE message_id = \(messageID)
                """, logger: PostgresTestDatabase.logger)
            {
                stored.append(try row.decode((String?, Int).self))
            }
            return stored
        }
    }

    /// v4's ALTER takes an exclusive lock on `processed_results`, and every batch's statement on the table queues
    /// behind it while it waits. Behind a transaction that holds the table for longer than 2 s (lock_timeout), the
    /// migration gives up, as a transient failure a worker's start retries, instead of waiting out the migration's
    /// 30 s statement timeout with the batches held; once the table is free it applies.
    @Test(.enabled(if: PostgresTestDatabase.url != nil, PostgresTestDatabase.skipReason))
    func postgresV4GivesUpItsLockRatherThanHoldTheBatches() async throws {
        try await PostgresTestDatabase.withSchema { location in
            let logger = PostgresTestDatabase.logger
            try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { connection in
                try await PostgresSchema.migrate(
                    on: connection, location: location, timeout: .seconds(30), logger: logger, through: 3)
            }
            try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { holder in
                try await holder.query("BEGIN", logger: logger)
                try await holder.query("SELECT count(*) FROM processed_results", logger: logger)
                let error = await #expect(throws: StoreError.self) {
                    try await WalletStores.migrate(.postgres(location))
                }
                #expect(error?.isTransient == true, "\(String(describing: error))")
                #expect(error?.message.contains("SQLSTATE 55P03") == true, "\(String(describing: error))")
                try await holder.query("COMMIT", logger: logger)
            }
            let (_, after) = try await WalletStores.migrate(.postgres(location), retiringOlderBuilds: true)
            #expect(after.isCurrent, "\(after)")
        }
    }

    /// `pg_attribute.attcompression` of `column` (`processed_results.body` by default): "l" for lz4, "" for the
    /// server's default.
    private static func bodyCompression(_ location: PostgresLocation, column: String = "processed_results.body")
        async throws -> String
    {
        let parts = column.split(separator: ".").map(String.init)
        return try await PostgresTestDatabase.withAdminConnection(schema: location.schema) { connection in
            var compression = "?"
            for try await row in try await connection.query(
                """
                SELECT attcompression::text FROM pg_attribute
                WHERE attrelid = \(parts[0])::regclass AND attname = \(parts[1])
                """, logger: PostgresTestDatabase.logger)
            {
                compression = try row.decode(String.self)
            }
            return compression
        }
    }
}

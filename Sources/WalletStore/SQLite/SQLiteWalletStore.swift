import Foundation
import GRDB
import Synchronization
import WalletRouting

/// The durable store: one SQLite file (WAL), one write transaction per batch (CONTRACT.md §10).
///
/// A `DatabaseQueue`, not a `DatabasePool`: the worker processes its batches one after another and every read
/// the router makes happens inside the batch's write transaction, so a pool's reader connections would sit idle.
/// WAL still matters with a single connection: a commit appends to the log (one fsync with `synchronous = FULL`)
/// instead of rewriting pages, and the `sqlite3` CLI can read the file while the worker writes.
public final class SQLiteWalletStore: WalletStore {
    public struct Configuration: Sendable {
        /// The database file; created (with its schema) when missing.
        public var path: String
        /// How long a write waits for another connection's lock before the batch fails as transient.
        /// Default: `.seconds(5)`.
        public var busyTimeout: Duration
        /// Migrate at open (creating a missing file), or require this build's schema and create nothing.
        /// Default: `.migrate`.
        public var schemaMode: SchemaMode

        public init(path: String) {
            self.path = path
            self.busyTimeout = .seconds(5)
            self.schemaMode = .migrate
        }
    }

    public let configuration: Configuration
    /// One sentence per store file that was readable by other users when the store opened it, and was restricted
    /// to its owner (or could not be): for the worker to log as a warning. Empty for a file this store created,
    /// which is 0600 from the start (`SQLiteFilePermissions`).
    public let permissionWarnings: [String]
    /// The file's absolute path, for error messages: an operator must be able to tell which file failed.
    private let fileName: String
    /// Nil once closed.
    private let database: Mutex<DatabaseQueue?>
    /// Cards and histories between batches; locked by the batch that holds the write transaction.
    private let cache = Mutex(SQLiteStateCache())
    /// Whether batches write the recorded results compressed: the file has `SQLiteSchema.compressedResults` (not
    /// yet when an index build before it waits for `wallet-worker migrate`).
    private let compressesResults: Bool

    /// Opens (creating when missing) and migrates the store; with `.requireCurrent`, opens an existing file and
    /// checks its schema.
    /// - Throws: a permanent `StoreError` when the file cannot be opened, is not a database, or was migrated by a
    ///   newer build (with `.requireCurrent`: is missing or not exactly this build's schema); a transient one when
    ///   it is locked for longer than the busy timeout.
    public init(configuration: Configuration) throws(StoreError) {
        self.configuration = configuration
        let fileName = URL(fileURLWithPath: configuration.path).path
        self.fileName = fileName
        if configuration.schemaMode == .requireCurrent, !FileManager.default.fileExists(atPath: configuration.path) {
            throw StoreError(
                .permanent,
                "SQLite store file \(fileName) does not exist, and this command creates no store: run "
                    + "`wallet-worker migrate --store sqlite:\(configuration.path)` first")
        }
        // Before SQLite sees the path: it would create the file (and so its -wal and -shm) with 0644 less the umask.
        permissionWarnings = SQLiteFilePermissions.prepare(path: configuration.path)

        var grdb = GRDB.Configuration()
        grdb.journalMode = .wal
        grdb.busyMode = .timeout(configuration.busyTimeout.timeInterval)
        grdb.prepareDatabase { db in
            // A payments store: a committed batch must survive power loss. One fsync of the WAL per batch.
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // 8 MiB of page cache instead of SQLite's 2 MiB, for the index pages every batch touches. Cards and
            // histories are read from the store's own cache (SQLiteStateCache), so more pages buy no CPU: 64 MiB
            // measured the same CPU per message as 8 MiB, with 58 MiB more resident (Benchmarks/JOURNAL.md).
            try db.execute(sql: "PRAGMA cache_size = -8192")
            // Checkpoint every 10,000 WAL pages (40 MiB) instead of 1,000: a page that many batches touch (index
            // leaves) is copied into the file once per checkpoint, not once per few batches. Measured end to end:
            // about 10% less CPU per message; 30,000 gave no more.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 10000")
        }

        do {
            let queue = try DatabaseQueue(path: configuration.path, configuration: grdb)
            do {
                switch configuration.schemaMode {
                case .migrate:
                    try Self.migrate(
                        queue, fileName: fileName, busyTimeout: configuration.busyTimeout, indexBuilds: true)
                case .migrateWithoutIndexBuilds:
                    try Self.migrate(
                        queue, fileName: fileName, busyTimeout: configuration.busyTimeout, indexBuilds: false)
                case .requireCurrent:
                    let status = try queue.read(Self.schemaStatus)
                    guard status.isUsable else {
                        throw status.requireCurrentError(
                            store: "SQLite \(fileName)", location: "sqlite:\(configuration.path)")
                    }
                }
                compressesResults = try queue.read(Self.schemaStatus).applied.contains(SQLiteSchema.compressedResults)
            } catch {
                try? queue.close()
                throw error
            }
            database = Mutex(queue)
        } catch {
            throw StoreError.sqlite(error, phase: .opening, fileName: fileName)
        }
    }

    /// Applies the migrations this build knows, refusing a file a newer build has migrated with a migration that
    /// is not compatible with this build: its schema may have changed in ways this code would silently get wrong.
    /// Without `indexBuilds`, an index build is applied only to a new file.
    private static func migrate(_ queue: DatabaseQueue, fileName: String, busyTimeout: Duration, indexBuilds: Bool)
        throws
    {
        // Two processes opening a new file at once race to create the schema: the loser's statements fail (e.g.
        // "no such table: grdb_migrations" between GRDB's two reads, "table cards already exists", or SQLITE_BUSY
        // without waiting when a read must become a write; for a migration that changes no table, such as v5, its
        // own record: "UNIQUE constraint failed: grdb_migrations.identifier") and its migration transaction rolls
        // back. Another attempt sees the winner's committed schema.
        // Retried for as long as the busy timeout: a loaded machine can hold the winner's migration for seconds.
        let deadline = ContinuousClock.now + busyTimeout
        while true {
            var appliedBefore: Set<String>?
            do {
                return try migrateOnce(queue, fileName: fileName, indexBuilds: indexBuilds, applied: &appliedBefore)
            } catch let error as DatabaseError
                where ContinuousClock.now < deadline
                && losesTheSchemaRace(error, queue: queue, appliedBefore: appliedBefore)
            {
                usleep(50_000)
            }
        }
    }

    /// Whether a migration failed because another process migrated the same file meanwhile: the database was busy
    /// (its migration still runs), or a statement failed on what it committed (a table that already exists, a
    /// migration already recorded), which shows as migrations applied since this attempt read them. A statement
    /// that fails on a schema no one else changed is this build's own fault and fails at once.
    private static func losesTheSchemaRace(
        _ error: DatabaseError, queue: DatabaseQueue, appliedBefore: Set<String>?
    ) -> Bool {
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_SCHEMA:
            return true
        case .SQLITE_ERROR, .SQLITE_CONSTRAINT:
            // Unread (the first read failed, as "no such table" between GRDB's reads): the read is retried too.
            guard let appliedBefore else { return true }
            guard let appliedNow = try? queue.read({ try SQLiteSchema.migrator.appliedIdentifiers($0) }) else {
                return true  // busy, say: another attempt tells
            }
            return appliedNow != appliedBefore
        default:
            return false
        }
    }

    /// One attempt; `applied` is set to the migrations it found applied once it read them.
    private static func migrateOnce(
        _ queue: DatabaseQueue, fileName: String, indexBuilds: Bool, applied: inout Set<String>?
    ) throws {
        let migrator = SQLiteSchema.migrator
        let status = try queue.read(Self.schemaStatus)
        applied = Set(status.applied)
        guard status.incompatibleUnknown.isEmpty else {
            throw StoreError(
                .permanent,
                "SQLite schema of \(fileName) is newer than this build (unknown migrations: "
                    + "\(status.incompatibleUnknown.joined(separator: ", "))): run a newer worker or restore a compatible file"
            )
        }
        if !status.unknown.isEmpty {
            // A newer build's file that declares this build compatible: used as it is, nothing to apply.
            guard status.pendingRequired.isEmpty else {
                throw StoreError(
                    .permanent, "SQLite schema of \(fileName) is \(status): this build cannot use it")
            }
            return
        }
        let isNew = status.applied.isEmpty
        if indexBuilds || isNew {
            try migrator.migrate(queue)
        } else {
            // The pending migrations up to the first index build, which waits for `wallet-worker migrate`.
            var target: String?
            for identifier in status.pending {
                if SQLiteSchema.optional.contains(identifier) { break }
                target = identifier
            }
            if let target { try migrator.migrate(queue, upTo: target) }
        }
        try queue.write { db in
            try SQLiteSchema.recordCompatibility(db, applied: try migrator.appliedIdentifiers(db))
        }
    }

    /// The schema of the file at `path`, read without changing it; a missing file has none.
    public static func schemaStatus(path: String) throws(StoreError) -> SchemaStatus {
        let fileName = URL(fileURLWithPath: path).path
        guard FileManager.default.fileExists(atPath: path) else {
            let known = SQLiteSchema.migrator.migrations
            return SchemaStatus(applied: [], known: known, optional: known.filter(SQLiteSchema.optional.contains))
        }
        var grdb = GRDB.Configuration()
        grdb.readonly = true
        do {
            let queue = try DatabaseQueue(path: path, configuration: grdb)
            defer { try? queue.close() }
            return try queue.read(schemaStatus)
        } catch {
            throw StoreError.sqlite(error, phase: .opening, fileName: fileName)
        }
    }

    private static func schemaStatus(_ db: Database) throws -> SchemaStatus {
        let migrator = SQLiteSchema.migrator
        let applied = try migrator.appliedIdentifiers(db)
        let known = migrator.migrations
        let unknown = applied.subtracting(known).sorted()
        return SchemaStatus(
            applied: known.filter(applied.contains) + unknown, known: known,
            optional: known.filter(SQLiteSchema.optional.contains),
            compatibleUnknown: try SQLiteSchema.compatibleUnknown(db, unknown: unknown))
    }

    // MARK: - WalletStore

    public func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await route(messages, router: router, now: now, commit: true)
    }

    /// One message (what `wallet-worker route` sends) is routed in a read transaction, against a snapshot of the
    /// file: it never waits for a worker's write lock, and writes nothing (a message's routing never reads its own
    /// effects, so they need not be applied). Several messages must see each other's effects: their transaction
    /// takes the write lock and rolls back.
    public func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        guard messages.count == 1 else { return try await route(messages, router: router, now: now, commit: false) }
        let queue = try openQueue()
        do {
            return try await queue.read { db in
                try BatchRouting.process(
                    messages, router: router, now: now, in: SQLiteSnapshot(reading: SQLiteBatchTransaction(db)))
            }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }

    private func route(_ messages: [InboundMessage], router: NotificationRouter, now: Date, commit: Bool)
        async throws(StoreError) -> [StoredDecision]
    {
        let queue = try openQueue()
        do {
            // Async access: the batch runs on GRDB's serial queue, not on a cooperative thread.
            return try await queue.writeWithoutTransaction { db in
                try self.cache.withLock { cache in
                    var decisions: [StoredDecision] = []
                    do {
                        // One IMMEDIATE transaction: it takes the write lock at BEGIN, where the busy timeout
                        // applies (a deferred one upgraded after its first reads fails at once when another writer
                        // got in first). Any throw rolls the whole batch back, and with it what the cache learnt.
                        try db.inTransaction(.immediate) {
                            // Under the write lock: nobody else can commit until this batch ends.
                            cache.validate(dataVersion: try Self.dataVersion(db))
                            decisions = try BatchRouting.process(
                                messages, router: router, now: now,
                                in: SQLiteBatchTransaction(db, cache: cache, compressesResults: compressesResults))
                            return commit ? .commit : .rollback
                        }
                        // What the cache learnt from a rolled-back batch never happened.
                        if !commit { cache.clear() }
                    } catch {
                        cache.clear()
                        throw error
                    }
                    return decisions
                }
            }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }

    public func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        let queue = try openQueue()
        do {
            return try await queue.write { db in
                // A message's results are in its row (schema v2): one delete forgets both.
                try db.execute(
                    sql: "DELETE FROM processed_messages WHERE recorded_at < ?",
                    arguments: [cutoff.timeIntervalSince1970])
                let expired = db.changesCount
                // The notes of messages no longer recorded. A file whose v4 waits for `wallet-worker migrate`
                // (behind v3's index build) has no notes, and its sweep must not fail for them.
                if try db.tableExists("undelivered_results") {
                    try db.execute(
                        sql: """
                            DELETE FROM undelivered_results
                            WHERE message_id NOT IN (SELECT message_id FROM processed_messages)
                            """)
                }
                return expired
            }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }

    public func noteResultDelivery(_ note: ResultDeliveryNote) async throws(StoreError) {
        guard !note.isEmpty else { return }
        let queue = try openQueue()
        do {
            try await queue.write { db in
                for undelivered in note.undelivered {
                    // Only beside a record: a message the store never recorded has nothing to replay.
                    try db.execute(
                        sql: """
                            INSERT INTO undelivered_results (message_id, dead_lettered_at, reason, error)
                            SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM processed_messages WHERE message_id = ?)
                            ON CONFLICT (message_id) DO UPDATE SET
                                dead_lettered_at = excluded.dead_lettered_at, reason = excluded.reason,
                                error = excluded.error
                            """,
                        arguments: [
                            undelivered.messageID, undelivered.deadLetteredAt.timeIntervalSince1970,
                            undelivered.reason, undelivered.error, undelivered.messageID,
                        ])
                }
                for messageID in note.delivered {
                    try db.execute(
                        sql: "DELETE FROM undelivered_results WHERE message_id = ?", arguments: [messageID])
                }
            }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }

    /// Closes the connection (after the batch in flight, if any). Later calls throw a permanent `StoreError`.
    public func close() async {
        guard let queue = database.withLock({ $0.take() }) else { return }
        // Best effort: GRDB finalises its statements first, so closing only fails on a misuse we cannot fix here.
        try? queue.close()
    }

    // MARK: - Internals

    /// Changes when another connection commits to the file (not with this connection's own commits).
    private static func dataVersion(_ db: Database) throws -> Int {
        try db.withDirectStatement(sql: "PRAGMA data_version") { statement in
            _ = try statement.step()
            return statement.int(0)
        }
    }

    private func openQueue() throws(StoreError) -> DatabaseQueue {
        guard let queue = database.withLock({ $0 }) else {
            throw StoreError(.permanent, "SQLite store is closed (\(fileName))")
        }
        return queue
    }

    /// Runs `body` in an IMMEDIATE transaction that is always rolled back.
    func writeAndRollBack(_ body: @escaping @Sendable (Database) throws -> Void) async throws(StoreError) {
        let queue = try openQueue()
        do {
            try await queue.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    try body(db)
                    return .rollback
                }
            }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }

    /// Reads committed state in a transaction of its own: for tests and diagnostics.
    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteBatchTransaction) throws -> T) async throws(StoreError)
        -> T
    {
        let queue = try openQueue()
        do {
            return try await queue.read { db in try body(SQLiteBatchTransaction(db)) }
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }
}

extension Duration {
    /// Seconds as a `TimeInterval`, for APIs that take one.
    fileprivate var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}

/// A dry run's view of a read transaction: reads go to the file, effects and records go nowhere.
private struct SQLiteSnapshot: WalletStoreTransaction {
    let reading: SQLiteBatchTransaction

    func card(_ digitalCardId: String) throws -> CardRecord? { try reading.card(digitalCardId) }

    func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool {
        try reading.hasTransaction(digitalCardId: digitalCardId, recordId: recordId)
    }

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
        try reading.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
    }

    func recordedDecision(messageID: String) throws -> Decision? { try reading.recordedDecision(messageID: messageID) }

    func apply(_ effects: [Effect]) throws {}

    func record(messageID: String, decision: Decision, at now: Date) throws {}
}

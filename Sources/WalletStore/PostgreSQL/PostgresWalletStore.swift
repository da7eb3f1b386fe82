import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization
import WalletRouting

/// The shared store for many replicas: PostgreSQL through a PostgresNIO connection pool, one transaction per
/// batch, the same rules as the other stores (`BatchRouting`; CONTRACT.md §10).
///
/// A batch: find the keys it reads (foreseen from its messages: the cards, processed ids, records and histories,
/// `BatchRouting.foreseenReads`), fetch them in a few statements (cards first, row-locked in sorted order), route the
/// batch against that snapshot without a round trip, write its effects and processed ids in bulk, commit. A pass
/// that reads something not fetched fetches it and routes again. Races with other replicas end in a conflict
/// (deadlock, serialization failure, a unique violation on a processed id or a new card) that is retried in a
/// fresh transaction a few times, where the winner's commit is visible: a processed id then replays.
public final class PostgresWalletStore: WalletStore {
    public struct Configuration: Sendable {
        public var location: PostgresLocation
        /// Connections this process opens at most. Default: `4`.
        public var poolSize: Int
        /// Longest a statement may run on the server, lock waits included (`statement_timeout`); also how long a
        /// batch waits for a pooled connection (at least 1 s). Default: `.seconds(5)`.
        public var statementTimeout: Duration
        /// Migrate in `prepare()`, or require this build's schema and change nothing. Default: `.migrate`.
        public var schemaMode: SchemaMode
        /// With `.migrate`, also apply the migrations that retire what older builds read (v6) to a database with
        /// data: `wallet-worker migrate --retire-older-builds`, once no replica of such a build runs. Default: false
        /// (a new database gets them anyway).
        public var retiresOlderBuilds: Bool

        public init(location: PostgresLocation) {
            self.location = location
            self.poolSize = 4
            self.statementTimeout = .seconds(5)
            self.schemaMode = .migrate
            self.retiresOlderBuilds = false
        }
    }

    /// Attempts of a batch that lost a race to another transaction, before it fails as transient.
    static let conflictAttempts = 5
    /// Processed ids deleted per statement by the retention sweep (a statement stays well within its timeout).
    static let expiryChunk = 5_000

    public let configuration: Configuration
    private let client: PostgresClient
    /// The client's `run()`; nil once closed.
    private let runner: Mutex<Task<Void, Never>?>
    private let schemaReady = Mutex(false)
    /// How batches write the recorded results (schema v6 and v7 retire what older builds need).
    private let resultsFormat = Mutex(PostgresResultsFormat.beforeAnyRetirement)
    /// Routing passes that read keys the foresight had not named, over the store's life (`PostgresKeyMemory`): a
    /// measure, for tests, of how well `NotificationRouter.foreseeReads` keeps up with the rules.
    let unforeseenPasses = Mutex(0)
    /// PostgresNIO logs queries with their arguments at debug level (a push token among them): never to our logs.
    private let logger = PostgresWalletStore.silentLogger
    static let silentLogger = Logger(label: "wallet-store.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    private var location: PostgresLocation { configuration.location }
    /// How long a batch waits for a pooled connection: the statement timeout, but at least 1 s (the pool may have
    /// to open one, TLS and SCRAM included).
    private var leaseLimit: Duration { max(configuration.statementTimeout, .seconds(1)) }
    /// A batch's statements each stop at the statement timeout on the server; this catches a server that stopped
    /// answering altogether.
    private var attemptLimit: Duration { leaseLimit + configuration.statementTimeout * 2 }

    /// Creates the pool and starts it; no connection is made until `prepare()` or the first batch.
    public init(configuration: Configuration) throws(StoreError) {
        guard configuration.poolSize >= 1 else {
            throw StoreError(.permanent, "PostgreSQL store: the pool size must be at least 1")
        }
        guard configuration.statementTimeout >= .milliseconds(1) else {
            throw StoreError(.permanent, "PostgreSQL store: the statement timeout must be positive")
        }
        self.configuration = configuration
        let settings = PostgresConnectionSettings(configuration)
        var pool = PostgresClient.Configuration(
            host: configuration.location.host, port: configuration.location.port,
            username: configuration.location.user, password: configuration.location.password,
            database: configuration.location.database, tls: settings.clientTLS)
        pool.options.maximumConnections = configuration.poolSize
        pool.options.minimumConnections = 0
        pool.options.connectTimeout = settings.connectTimeout
        pool.options.additionalStartupParameters = settings.startupParameters
        let client = PostgresClient(configuration: pool, backgroundLogger: Self.silentLogger)
        self.client = client
        runner = Mutex(Task { await client.run() })
    }

    // MARK: - WalletStore

    /// Connects with a connection of its own (so a refused password or a missing database is reported as such)
    /// and migrates the schema, or with `.requireCurrent` checks it. Done once; `process` and
    /// `expireProcessedMessages` call it first.
    public func prepare() async throws(StoreError) {
        if schemaReady.withLock({ $0 }) { return }
        let location = location
        let logger = logger
        let settings = PostgresConnectionSettings(configuration)
        let status: SchemaStatus
        let retiresOlderBuilds = configuration.retiresOlderBuilds
        switch configuration.schemaMode {
        case .migrate:
            // Index builds run CONCURRENTLY and may take minutes on a large table (writes go on meanwhile).
            let indexBuildTimeout = max(settings.migrationTimeout, Self.indexBuildTimeout)
            status = try await withOwnConnection(within: indexBuildTimeout, doing: "migrating") { connection in
                try await PostgresSchema.migrate(
                    on: connection, location: location, timeout: settings.migrationTimeout, logger: logger,
                    scope: .everything, indexBuildTimeout: indexBuildTimeout, retiringOlderBuilds: retiresOlderBuilds)
                return try await PostgresSchema.status(on: connection, logger: logger)
            }
        case .migrateWithoutIndexBuilds:
            status = try await withOwnConnection(within: settings.migrationTimeout, doing: "migrating") {
                connection in
                try await PostgresSchema.migrate(
                    on: connection, location: location, timeout: settings.migrationTimeout, logger: logger,
                    scope: .withoutIndexBuilds)
                return try await PostgresSchema.status(on: connection, logger: logger)
            }
        case .requireCurrent:
            status = try await schemaStatus()
            guard status.isUsable else {
                throw status.requireCurrentError(
                    store: "PostgreSQL \(location.shortName)", location: "\(location)")
            }
        }
        resultsFormat.withLock { $0 = PostgresResultsFormat(applied: status.applied) }
        schemaReady.withLock { $0 = true }
    }

    /// The longest an index build of `wallet-worker migrate` may take (it does not hold writes).
    static let indexBuildTimeout: Duration = .seconds(3_600)

    /// The database's schema, read without changing it (nothing is created, not even the migrations table).
    public func schemaStatus() async throws(StoreError) -> SchemaStatus {
        let logger = logger
        return try await withOwnConnection(within: configuration.statementTimeout, doing: "reading its schema") {
            connection in
            try await PostgresSchema.status(on: connection, logger: logger)
        }
    }

    /// Runs `body` on a connection of its own, outside the pool, closed afterwards; the whole within `limit` (plus
    /// the connect timeout), so a start-up against a server that hangs ends. The connection's session settings are
    /// checked first (`checkSessionSettings`): every start-up opens one, so a pooler that loses them stops the
    /// worker at start, before the pool's connections, which take the same path, are used.
    private func withOwnConnection<Result: Sendable>(
        within limit: Duration, doing activity: String,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(StoreError) -> Result {
        try checkOpen()
        let location = location
        let logger = logger
        let settings = PostgresConnectionSettings(configuration)
        let opened = OpenedConnection()
        let limit = settings.connectTimeout + limit
        do {
            return try await PostgresDeadline.run(within: limit, onExpiry: { opened.close() }) {
                let connection = try await settings.connect(logger: logger)
                opened.set(connection)
                let result: Result
                do {
                    // Before anything else: a migration without the schema's search_path would create the tables
                    // elsewhere.
                    try await settings.checkSessionSettings(on: connection, logger: logger)
                    result = try await body(connection)
                } catch {
                    // Closing rolls back a migration that failed half-way (no ROLLBACK sent: see
                    // PostgresAttemptDeadline on queries written to a connection that is closing).
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
                return result
            }
        } catch is PostgresDeadline.Expired {
            throw StoreError(
                .transient, "PostgreSQL did not answer within \(limit) while \(activity) (\(location.shortName))")
        } catch {
            throw StoreError.postgres(error, at: location)
        }
    }

    public func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await route(messages, router: router, now: now, commit: true)
    }

    /// A read-only transaction that locks nothing and writes nothing: the batch's effects stay in its overlay.
    public func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await route(messages, router: router, now: now, commit: false)
    }

    private func route(_ messages: [InboundMessage], router: NotificationRouter, now: Date, commit: Bool)
        async throws(StoreError) -> [StoredDecision]
    {
        try await prepare()
        let keys = PostgresKeyMemory()
        defer { unforeseenPasses.withLock { $0 += keys.unforeseenPasses } }
        let logger = logger
        let format = resultsFormat.withLock { $0 }
        var attempt = 1
        while true {
            do {
                return try await withConnection { connection in
                    try await Self.processBatch(
                        messages, router: router, now: now, keys: keys, commit: commit, format: format,
                        statements: PostgresBatchStatements(connection: connection, logger: logger))
                }
            } catch {
                let failure = StoreError.postgres(error, at: location)
                guard StoreError.isConflict(error) else { throw failure }
                guard attempt < Self.conflictAttempts else {
                    throw StoreError(.transient, "\(failure.message), still after \(attempt) attempts")
                }
            }
            attempt += 1
            // A short random pause, so two replicas that collided do not collide again in step.
            try? await Task.sleep(for: .milliseconds(Int.random(in: 1...(10 << attempt))))
        }
    }

    public func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        try await prepare()
        let logger = logger
        var total = 0
        while true {
            let expired: Int
            do {
                expired = try await withConnection { connection in
                    try await PostgresBatchStatements(connection: connection, logger: logger)
                        .expire(recordedBefore: cutoff, limit: Self.expiryChunk)
                }
            } catch {
                throw StoreError.postgres(error, at: location)
            }
            total += expired
            if expired < Self.expiryChunk { break }
        }
        do {
            try await withConnection { connection in
                try await PostgresBatchStatements(connection: connection, logger: logger).forgetOrphanedNotes()
            }
        } catch {
            throw StoreError.postgres(error, at: location)
        }
        return total
    }

    public func noteResultDelivery(_ note: ResultDeliveryNote) async throws(StoreError) {
        guard !note.isEmpty else { return }
        try await prepare()
        let logger = logger
        do {
            try await withConnection { connection in
                try await PostgresBatchStatements(connection: connection, logger: logger).note(note)
            }
        } catch {
            throw StoreError.postgres(error, at: location)
        }
    }

    /// Stops the pool (its `run()` task): open connections are closed. Later calls throw a permanent `StoreError`.
    public func close() async {
        guard let runner = runner.withLock({ $0.take() }) else { return }
        runner.cancel()
        await runner.value
    }

    // MARK: - A batch

    /// One attempt of a batch, in one transaction on `statements`' connection; without `commit`, a read-only one
    /// that takes no row locks and is rolled back. `format`: how the recorded results are written
    /// (`PostgresBatchStatements.write`).
    private static func processBatch(
        _ messages: [InboundMessage], router: NotificationRouter, now: Date, keys: PostgresKeyMemory, commit: Bool,
        format: PostgresResultsFormat, statements: PostgresBatchStatements
    ) async throws -> [StoredDecision] {
        try await statements.begin(readOnly: !commit)
        do {
            // The keys of earlier attempts too: a retry locks every card it will need up front, in order.
            var wanted = keys.remembered
            let foreseen = BatchRouting.foreseenReads(messages, router: router)
            wanted.formUnion(PostgresBatchKeys(foreseen: foreseen.state, messageIDs: foreseen.messageIDs))
            var snapshot = PostgresBatchSnapshot()
            for _ in 0..<8 {
                let needed = snapshot.missing(from: wanted)
                if !needed.isEmpty {
                    try await statements.fetch(needed, into: &snapshot, lock: commit)
                }
                let pass = PostgresBatchOverlay(snapshot: snapshot)
                let decisions = try BatchRouting.process(
                    messages, bodies: foreseen.bodies, router: router, now: now, in: pass)
                if pass.missing.isEmpty {
                    if commit {
                        try await statements.write(pass, now: now, format: format)
                        try await statements.commit()
                    } else {
                        try await statements.rollback()
                    }
                    return decisions
                }
                // The real state led the router to reads that were not foreseen: fetch them, route again.
                wanted.formUnion(pass.missing)
                keys.rememberAfterUnforeseenPass(wanted)
            }
            throw StoreError(.transient, "PostgreSQL store: the batch kept reading keys it had not fetched")
        } catch {
            // A broken connection gets no ROLLBACK (PostgresNIO would never answer a query written to a connection
            // that is closing), and a connection whose ROLLBACK fails is not handed back inside a transaction. Closed
            // and awaited, so the pool has seen it go before the lease ends.
            // So is one on which a statement's preparation may have failed: PostgresNIO keeps that statement failed
            // for the connection's life (`mayHaveFailedAPreparation`).
            do {
                guard !Self.isConnectionBroken(by: error), !Self.mayHaveFailedAPreparation(error) else { throw error }
                try await statements.rollback()
            } catch {
                try? await statements.connection.close()
            }
            throw error
        }
    }

    /// Whether `error` left the connection unusable: the connection failed, or the server ended the session
    /// (a FATAL error: terminated, shutting down, idle-transaction timeout).
    static func isConnectionBroken(by error: any Error) -> Bool {
        guard let error = error as? PSQLError else { return false }
        guard error.code == .server else { return true }
        return ["FATAL", "PANIC"].contains(error.serverInfo?[.severity] ?? "")
    }

    /// Whether `error` may come from preparing a statement (`PreparedBatchStatement`). PostgresNIO 1.x keeps a
    /// statement whose preparation failed as failed on its connection, answering every later use with the same
    /// error without asking the server; a preparation can fail for a passing reason (the statement timeout behind
    /// a migration's lock, a table not created yet), so the connection is closed rather than pooled again. The
    /// server's answers to the data (SQLSTATE classes 22 and 23: a value it refuses, a unique violation between
    /// replicas) come from executing a statement already prepared, and keep the connection.
    static func mayHaveFailedAPreparation(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server else { return false }
        let state = error.serverInfo?[.sqlState] ?? ""
        return !(state.hasPrefix("22") || state.hasPrefix("23"))
    }

    // MARK: - Connections

    /// Runs `body` on a pooled connection within the deadlines. `body`'s own errors come back as thrown; a lease
    /// that fails or times out becomes a `StoreError` saying why (a connection of our own tells a wrong password
    /// from a server that is down, which the pool does not).
    private func withConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try checkOpen()
        do {
            return try await PostgresAttemptDeadline.run(
                on: client, leaseLimit: leaseLimit, totalLimit: attemptLimit
            ) { connection in
                do {
                    return try await body(connection)
                } catch {
                    throw WorkFailure(underlying: error)
                }
            }
        } catch let failure as WorkFailure {
            throw failure.underlying
        } catch is PostgresAttemptDeadline.ConnectionClosed {
            throw StoreError(
                .transient, "PostgreSQL connection lost while idle in the pool (\(location.shortName))", outage: true)
        } catch let exceeded as PostgresAttemptDeadline.Exceeded {
            if exceeded.phase == .running {
                throw StoreError(
                    .transient,
                    "PostgreSQL did not answer within \(attemptLimit): connection closed (\(location.shortName))")
            }
            throw await leaseFailure(pool: "no pooled connection within \(leaseLimit)", timedOut: true)
        } catch {
            throw await leaseFailure(pool: "the pool gave no connection (\(type(of: error)))", timedOut: false)
        }
    }

    /// Why the pool has no connection: a connection of our own fails the way the pool's do, with the cause, and the
    /// pool's own `reason` beside it; if it connects, the pool was busy (a lease that `timedOut`) and `reason`
    /// stands.
    private func leaseFailure(pool reason: String, timedOut: Bool) async -> StoreError {
        if runner.withLock({ $0 == nil }) {
            return StoreError(.permanent, "PostgreSQL store is closed (\(location.shortName))")
        }
        do {
            let connection = try await PostgresConnectionSettings(configuration).connect(logger: logger)
            try? await connection.close()
            let busy = timedOut ? " (all \(configuration.poolSize) busy)" : ""
            return StoreError(.transient, "PostgreSQL: \(reason)\(busy) (\(location.shortName))")
        } catch {
            let failure = StoreError.postgres(error, at: location)
            // Refused at start, the settings cannot work: the worker stops (`prepare`). Refused once the store was
            // in use, the password was rotated under the running worker: like an outage, the batches are held and
            // the store tried again (`wallet_store_available` 0, the WalletStoreUnavailable alert) until the
            // worker's secret is updated, instead of every replica stopping.
            if failure.kind == .permanent, failure.isLoginRefusal, schemaReady.withLock({ $0 }) {
                return StoreError(
                    .transient, "\(failure.message): refused after the worker had logged in (a rotated password?)")
            }
            guard failure.kind == .transient else { return failure }
            // Both: a server that is down fails the connection at once, and one that is only loaded may time it out
            // while the pool is merely busy. The operator reads which from the two.
            return StoreError(
                .transient, "\(failure.message); \(reason), a pool of \(configuration.poolSize)",
                outage: failure.isOutage)
        }
    }

    private func checkOpen() throws(StoreError) {
        if runner.withLock({ $0 == nil }) {
            throw StoreError(.permanent, "PostgreSQL store is closed (\(location.shortName))")
        }
    }

    /// An error of the work on a leased connection, told apart from a failure to lease one.
    private struct WorkFailure: Error {
        var underlying: any Error
    }

    // MARK: - Reads outside the protocol (tests, diagnostics)

    /// Runs `body` on a pooled connection outside any batch (reads see committed state).
    func read<T: Sendable>(_ body: @escaping @Sendable (PostgresBatchStatements) async throws -> T)
        async throws(StoreError) -> T
    {
        try await prepare()
        let logger = logger
        do {
            return try await withConnection { connection in
                try await body(PostgresBatchStatements(connection: connection, logger: logger))
            }
        } catch {
            throw StoreError.postgres(error, at: location)
        }
    }
}

/// The connection `prepare` opened, for its deadline to close.
private final class OpenedConnection: Sendable {
    private let connection = Mutex<PostgresConnection?>(nil)

    func set(_ opened: PostgresConnection) {
        connection.withLock { $0 = opened }
    }

    /// Starts closing it; the reference stays, so the connection is not released before it has closed.
    func close() {
        guard let opened = connection.withLock({ $0 }) else { return }
        let _: EventLoopFuture<Void> = opened.close()
    }
}

/// The keys every attempt of one batch has found so far (shared by its attempts, one after another).
final class PostgresKeyMemory: Sendable {
    private let keys = Mutex((found: PostgresBatchKeys(), unforeseenPasses: 0))

    var remembered: PostgresBatchKeys { keys.withLock { $0.found } }
    /// Routing passes that read keys the foresight had not named, each followed by one more fetch.
    var unforeseenPasses: Int { keys.withLock { $0.unforeseenPasses } }

    /// After a pass that read keys not fetched: `wanted` holds them now.
    func rememberAfterUnforeseenPass(_ wanted: PostgresBatchKeys) {
        keys.withLock {
            $0.found.formUnion(wanted)
            $0.unforeseenPasses += 1
        }
    }
}

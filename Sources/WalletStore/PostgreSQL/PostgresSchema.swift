import Logging
import PostgresNIO

/// The store's schema as versioned migrations.
///
/// One transaction applies the table changes, under a transaction-scoped advisory lock keyed by the schema:
/// replicas starting together queue on the lock, the first migrates, the others find the work done. An index
/// build on a table that holds data is not part of it: it runs `CONCURRENTLY` (writes go on meanwhile), outside
/// any transaction, and only when asked (`wallet-worker migrate`, the migrate Job), never at a worker's start;
/// a worker runs without it (reads are slower, results the same). On a new database everything is created at
/// once (the tables are empty).
///
/// Each migration records the oldest schema version a build must know to use a database that has it
/// (`compatible_with`): an index leaves it at the previous version, so an older build (a rollback, an old pod in
/// a rolling update) runs on the newer schema; a version this build does not know and that does not declare
/// it compatible is refused, since that build's schema may mean something this code would get wrong. Never edit
/// what a shipped migration does: append a new version.
enum PostgresSchema {
    struct Migration {
        var version: Int
        var name: String
        /// One statement each (the extended protocol takes one statement per query), run in the migration's
        /// transaction.
        var statements: [String]
        /// The oldest schema version a build must know to use a database with this migration applied.
        var compatibleWith: Int
        /// An index build: on a table with data it runs these instead (`CONCURRENTLY`, each its own statement
        /// outside a transaction), and only in `wallet-worker migrate`. Nil for a migration of the tables.
        var concurrentStatements: [String]? = nil
        /// The index a concurrent build creates: an invalid one left by an interrupted build is dropped first.
        var builtIndex: String? = nil
        /// Whether this build needs it to run: `run --no-migrate` and `inspect` refuse a database without it. An
        /// index build is never needed (reads are slower without it, results the same), nor is a storage setting,
        /// nor the retirement of what older builds need.
        var isRequired: Bool { concurrentStatements == nil && !isStorageSetting && !retiresOlderBuilds }
        /// A change of how the server stores values, which this build reads and writes the same either way.
        var isStorageSetting = false
        /// The contract step of a change made in two (expand, then contract): it stops writing what builds older
        /// than `compatibleWith` read, and makes their writes fail. On a database with data it runs only when the
        /// operator says no replica of such a build runs any more (`wallet-worker migrate --retire-older-builds`),
        /// and not while a session of such a build is connected (`olderBuildSessions`); until then this build
        /// writes for them too. A new database gets it with the rest.
        var retiresOlderBuilds = false
        /// Not applied with the table changes of a worker's start on a database with data: an index build, or a
        /// retirement.
        var waitsForMigrateOnADatabaseWithData: Bool { concurrentStatements != nil || retiresOlderBuilds }
    }

    static let migrations: [Migration] = [
        Migration(
            version: 1, name: "cards, transactions, installations, processed messages",
            statements: [
                // Ids are compared byte for byte (COLLATE "C"): faster than a locale's collation, and the same order
                // for every replica whatever the database's locale.
                """
                CREATE TABLE cards (
                    digital_card_id   text COLLATE "C" PRIMARY KEY,
                    state             text NOT NULL CHECK (state IN ('active', 'suspended', 'deleted')),
                    tokenized_card_id text,
                    key_type          text NOT NULL CHECK (key_type IN ('SUK', 'LUK')),
                    payments_left     integer,            -- NULL with keys_expire_at: no payment keys issued
                    keys_expire_at    double precision    -- seconds since the Unix epoch, as the router computes it
                )
                """,
                // stored_sequence: an identity, so among records with equal instants the later stored sorts first.
                // A card's records are only written under its row lock, so its sequence follows commit order.
                """
                CREATE TABLE transactions (
                    stored_sequence      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    digital_card_id      text COLLATE "C" NOT NULL,
                    record_id            text COLLATE "C" NOT NULL,
                    date                 text NOT NULL,              -- as received (ISO 8601 with zone)
                    instant              double precision NOT NULL,  -- date as seconds since the epoch, for ordering
                    status               text NOT NULL,
                    type                 text NOT NULL,
                    currency_code        text NOT NULL,
                    amount               text NOT NULL,              -- the JSON number literal, exactly as received
                    display_amount       text,
                    merchant_name        text,
                    merchant_type        text,
                    merchant_postal_code text,
                    terminal_id          text,
                    merchant_id          text,
                    is_auxiliary         boolean NOT NULL,
                    UNIQUE (digital_card_id, record_id)
                )
                """,
                // Serves the history reads: one index range scan in the order the router reads, no sort.
                """
                CREATE INDEX transactions_newest_first
                    ON transactions (digital_card_id, instant DESC, stored_sequence DESC)
                """,
                """
                CREATE TABLE installations (
                    installation_id text COLLATE "C" PRIMARY KEY,
                    platform        text NOT NULL,
                    push_channel    text NOT NULL,
                    tags            jsonb NOT NULL DEFAULT '[]'  -- a JSON array of strings, in order
                )
                """,
                """
                CREATE TABLE processed_messages (
                    message_id      text COLLATE "C" PRIMARY KEY,  -- the unique constraint that makes effects once
                    recorded_at     timestamptz NOT NULL,
                    outcome         text NOT NULL,
                    sender          text,
                    digital_card_id text
                )
                """,
                "CREATE INDEX processed_messages_recorded_at ON processed_messages (recorded_at)",
                // The recorded results, replayed verbatim: position is the publication order. No foreign key to
                // processed_messages: its check costs a lookup per result row (a third of this insert's time); the
                // two are written in one transaction and the retention sweep deletes both.
                """
                CREATE TABLE processed_results (
                    message_id        text COLLATE "C" NOT NULL,
                    position          integer NOT NULL,
                    exchange          text NOT NULL,
                    routing_key       text NOT NULL,
                    body              bytea NOT NULL,
                    result_message_id text,
                    correlation_id    text,
                    type              text NOT NULL,
                    traceparent       text,
                    PRIMARY KEY (message_id, position)
                )
                """,
            ],
            compatibleWith: 1),
        // v1's index filtered the kind from the heap: an auxiliary view of a card with thousands of primary records
        // read every one of them, on every TNS. Each kind is now one range (SQLite's v3 made the same change).
        // An index only: a v1 build reads the same rows through either index. Built CONCURRENTLY on a populated
        // table (about 1 s per million records, writes going on: docs/design/store.md).
        Migration(
            version: 2, name: "transactions index by card and kind",
            statements: [
                """
                CREATE INDEX transactions_newest_first_by_kind
                    ON transactions (digital_card_id, is_auxiliary, instant DESC, stored_sequence DESC)
                """,
                "DROP INDEX transactions_newest_first",
            ],
            compatibleWith: 1,
            concurrentStatements: [
                """
                CREATE INDEX CONCURRENTLY IF NOT EXISTS transactions_newest_first_by_kind
                    ON transactions (digital_card_id, is_auxiliary, instant DESC, stored_sequence DESC)
                """,
                "DROP INDEX CONCURRENTLY IF EXISTS transactions_newest_first",
            ],
            builtIndex: "transactions_newest_first_by_kind"),
        // Messages dead-lettered after their effects were committed, until a replay delivers their results
        // (`UndeliveredResults`). A table of its own, written outside the batches: an older build runs on the
        // database without knowing it, and the retention sweep deletes a note with its record.
        Migration(
            version: 3, name: "undelivered results",
            statements: [
                """
                CREATE TABLE undelivered_results (
                    message_id       text COLLATE "C" PRIMARY KEY,
                    dead_lettered_at timestamptz NOT NULL,
                    reason           text NOT NULL,
                    error            text NOT NULL
                )
                """
            ],
            compatibleWith: 1),
        // Result bodies over about 2 kB (a TNS history of ten records) are compressed by the server as they are
        // stored (TOAST). lz4 compresses them in half pglz's time and reads them back in half (measured on the
        // benchmark's results: 11 µs less per compressed body, 726 bytes stored against 685). Only where the
        // server was built with lz4 (PostgreSQL 14 and later as packaged); elsewhere nothing changes (the ALTER is
        // an EXECUTE, so PostgreSQL 13 never parses syntax it lacks). Bodies stored before keep pglz, and every
        // build reads both: compatible with the builds before it, and not needed by this one.
        // The ALTER takes an exclusive lock on the table, and every batch's statement on it queues behind the
        // lock while it waits: it waits at most 2 s (lock_timeout, for the rest of the migration's transaction),
        // then the migration fails as transient (SQLSTATE 55P03) and a worker's start tries again later.
        Migration(
            version: 4, name: "result bodies compressed with lz4",
            statements: [
                """
                DO $$
                BEGIN
                    IF EXISTS (SELECT FROM pg_settings
                               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
                        PERFORM set_config('lock_timeout', '2000', true);
                        EXECUTE 'ALTER TABLE processed_results ALTER COLUMN body SET COMPRESSION lz4';
                    END IF;
                END
                $$
                """
            ],
            compatibleWith: 1, isStorageSetting: true),
        // The expand step of storing a message's results in one value, as SQLite's v2 does: the recorded results
        // as one blob (`RecordedResultsEncoding`) in a column of the message's record, instead of a row per result
        // in `processed_results` (a heap row and an index entry per result, most of a batch's WAL: issue 38). Adding
        // a nullable column changes the catalog only. Older builds run on it and never read the column (their
        // records leave it NULL); this build writes both the column and the rows until v6, so an older replica
        // still replays its records. Its lock waits at most 2 s, as v4's.
        Migration(
            version: 5, name: "recorded results in one value per message",
            statements: [
                """
                DO $$
                BEGIN
                    PERFORM set_config('lock_timeout', '2000', true);
                    ALTER TABLE processed_messages ADD COLUMN results bytea;
                    IF EXISTS (SELECT FROM pg_settings
                               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
                        EXECUTE 'ALTER TABLE processed_messages ALTER COLUMN results SET COMPRESSION lz4';
                    END IF;
                END
                $$
                """
            ],
            compatibleWith: 1),
        // The contract step: result rows are no longer written, only v5's value. A build before v5 would replay such
        // a record with no results, so it must not run beside this: it refuses the database at start (compatible
        // with 5), and a record it writes (results NULL) breaks the check, an error it takes as permanent: it stops,
        // its batch not acknowledged. NOT VALID: records older builds left keep their NULL, and their rows in
        // `processed_results` stay readable until the retention sweep deletes them.
        Migration(
            version: 6, name: "result rows retired",
            statements: [
                """
                DO $$
                BEGIN
                    PERFORM set_config('lock_timeout', '2000', true);
                    ALTER TABLE processed_messages
                        ADD CONSTRAINT processed_messages_results_recorded CHECK (results IS NOT NULL) NOT VALID;
                END
                $$
                """
            ],
            compatibleWith: 5, retiresOlderBuilds: true),
        // No table changes: from here on the recorded results are written compressed (`RecordedResultsEncoding`
        // version 2, about a quarter of the bytes: less WAL, heap and server CPU per message, Benchmarks/README.md).
        // A build before this one cannot read such a value: it would fail the replay of a record this build wrote
        // (a permanent error: it stops, the batch not acknowledged). So it is a retirement, as v6 is: compatible with
        // 7 only, so those builds refuse the database at start, and applied on a database with data only by
        // `wallet-worker migrate --retire-older-builds`. Until then this build writes values they read. Values
        // written before stay as they are: every build since reads both.
        Migration(
            version: 7, name: "recorded results compressed", statements: [], compatibleWith: 7,
            retiresOlderBuilds: true),
    ]

    /// The version from which batches write no result rows (`PostgresBatchStatements.write`).
    static let resultRowsRetiredVersion = 6
    /// The version from which batches write the recorded results compressed.
    static let compressedResultsVersion = 7

    /// This build's newest schema version.
    static var newestVersion: Int { migrations.map(\.version).max() ?? 0 }

    /// What a run of `migrate` applies.
    enum Scope {
        /// Everything, index builds included (`wallet-worker migrate`).
        case everything
        /// The table changes; index builds only on a new database (a worker's start).
        case withoutIndexBuilds
    }

    /// Creates the schema (when `location.schema` names one) and applies the missing migrations: the table
    /// changes in one transaction, then (with `.everything`) each index build on its own, and (with
    /// `retiringOlderBuilds`) each retirement. Returns the migrations left for `wallet-worker migrate`. On a failure
    /// the caller closes the connection, which rolls the transaction back.
    /// - Parameter lastVersion: the newest migration to apply (tests build a database as an older build left it).
    /// - Throws: a permanent `StoreError` when the database holds a version this build does not know and that is
    ///   not declared compatible with it.
    @discardableResult
    static func migrate(
        on connection: PostgresConnection, location: PostgresLocation, timeout: Duration, logger: Logger,
        through lastVersion: Int = .max, scope: Scope = .everything, indexBuildTimeout: Duration? = nil,
        retiringOlderBuilds: Bool = false
    ) async throws -> [String] {
        try await beginUnderMigrationLock(on: connection, location: location, timeout: timeout, logger: logger)
        if let schema = location.schema {
            var exists = false
            for try await _ in try await connection.query(
                "SELECT 1 FROM pg_namespace WHERE nspname = \(schema)", logger: logger)
            {
                exists = true
            }
            if !exists {
                // A plain identifier (checked when the location was parsed): safe to write into the SQL.
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: logger)
            }
        }
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS wallet_schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        // Added by the version that made index builds compatible; NULL (an earlier build's row): its own version.
        try await connection.query(
            "ALTER TABLE wallet_schema_migrations ADD COLUMN IF NOT EXISTS compatible_with integer", logger: logger)
        let recorded = try await recordedMigrations(on: connection, logger: logger, hasCompatibility: true)
        let applied = Set(recorded.map(\.version))
        let incompatible = recorded.filter { row in
            !migrations.contains { $0.version == row.version } && row.compatibleWith > newestVersion
        }.map(\.version).sorted()
        guard incompatible.isEmpty else {
            throw StoreError(
                .permanent,
                "PostgreSQL schema of \(location.shortName) is newer than this build (unknown migrations: "
                    + "\(incompatible.map(String.init).joined(separator: ", ")), not compatible with it): run a newer worker"
            )
        }
        let isNew = applied.isEmpty
        var deferred: [Migration] = []
        for migration in migrations where !applied.contains(migration.version) && migration.version <= lastVersion {
            if migration.waitsForMigrateOnADatabaseWithData && !isNew {
                // An index build never inside this transaction on a table with data: its lock would hold every write.
                // A retirement only when no older build is connected.
                deferred.append(migration)
                continue
            }
            // A table change does not wait for an index build before it (none depends on an index): a worker's start
            // applies it while the index waits for `wallet-worker migrate`.
            guard deferred.allSatisfy({ $0.concurrentStatements != nil }) else { break }
            try await apply(migration, on: connection, logger: logger)
        }
        // Rows of earlier builds get the compatibility this build knows for them.
        for migration in migrations where applied.contains(migration.version) {
            try await connection.query(
                """
                UPDATE wallet_schema_migrations SET compatible_with = \(migration.compatibleWith)
                WHERE version = \(migration.version) AND compatible_with IS NULL
                """,
                logger: logger)
        }
        try await connection.query("COMMIT", logger: logger)
        guard scope == .everything else {
            if !deferred.isEmpty {
                logger.warning(
                    """
                    schema migrations that build an index or retire older builds are not applied at start: run \
                    `wallet-worker migrate` (the migrate Job) for an index, `wallet-worker migrate \
                    --retire-older-builds` once no replica of an older build runs for a retirement; the worker runs \
                    without them
                    """,
                    metadata: ["migrations": "\(deferred.map { versionName($0.version) }.joined(separator: ", "))"])
            }
            return deferred.map { versionName($0.version) }
        }
        for (index, migration) in deferred.enumerated() {
            if migration.concurrentStatements != nil {
                try await buildConcurrently(
                    migration, on: connection, location: location, timeout: indexBuildTimeout ?? timeout,
                    logger: logger)
            } else if !retiringOlderBuilds {
                // The operator's word is needed (`--retire-older-builds`): the migrations after it wait with it.
                return deferred[index...].map { versionName($0.version) }
            } else if try await !retire(
                migration, on: connection, location: location, timeout: timeout, logger: logger)
            {
                // The migrations after it wait with it.
                return deferred[index...].map { versionName($0.version) }
            }
        }
        if !deferred.isEmpty, let last = deferred.last,
            migrations.contains(where: { $0.version > last.version && $0.version <= lastVersion })
        {
            // Table changes that came after the index builds.
            return try await migrate(
                on: connection, location: location, timeout: timeout, logger: logger, through: lastVersion,
                scope: scope, indexBuildTimeout: indexBuildTimeout, retiringOlderBuilds: retiringOlderBuilds)
        }
        return []
    }

    /// Opens the transaction of a migration: its own statement timeout (the connection's is the batches'), and the
    /// advisory lock keyed by schema (stores in different schemas of one database migrate independently).
    private static func beginUnderMigrationLock(
        on connection: PostgresConnection, location: PostgresLocation, timeout: Duration, logger: Logger
    ) async throws {
        try await connection.query("BEGIN", logger: logger)
        try await connection.query(
            PostgresQuery(unsafeSQL: "SET LOCAL statement_timeout = \(max(1, timeout.wholeMilliseconds))"),
            logger: logger)
        try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended(\(lockName(location)), 0))", logger: logger)
    }

    /// Runs a migration's statements and records it, in the open transaction.
    private static func apply(_ migration: Migration, on connection: PostgresConnection, logger: Logger) async throws {
        for statement in migration.statements {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        try await connection.query(
            """
            INSERT INTO wallet_schema_migrations (version, name, compatible_with)
            VALUES (\(migration.version), \(migration.name), \(migration.compatibleWith))
            """,
            logger: logger)
    }

    private static func lockName(_ location: PostgresLocation) -> String {
        "wallet-notification-worker migrations " + (location.schema ?? "(search_path)")
    }

    /// One index build, `CONCURRENTLY`: writes to the table go on while it builds. Under a session advisory lock
    /// of its own (not the one a worker's start takes, which must not wait for a build), so two `migrate` runs
    /// build it once; an invalid index a killed build left behind is dropped first.
    private static func buildConcurrently(
        _ migration: Migration, on connection: PostgresConnection, location: PostgresLocation, timeout: Duration,
        logger: Logger
    ) async throws {
        let lock = lockName(location) + " index builds"
        try await connection.query(
            PostgresQuery(unsafeSQL: "SET statement_timeout = \(max(1, timeout.wholeMilliseconds))"), logger: logger)
        try await connection.query("SELECT pg_advisory_lock(hashtextextended(\(lock), 0))", logger: logger)
        do {
            let recorded = try await recordedMigrations(on: connection, logger: logger, hasCompatibility: true)
            if !recorded.contains(where: { $0.version == migration.version }) {
                if let index = migration.builtIndex {
                    var invalid = false
                    for try await _ in try await connection.query(
                        """
                        SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                        WHERE c.relname = \(index) AND c.relnamespace = current_schema()::regnamespace
                          AND NOT i.indisvalid
                        """, logger: logger)
                    {
                        invalid = true
                    }
                    if invalid {
                        try await connection.query(
                            PostgresQuery(unsafeSQL: "DROP INDEX CONCURRENTLY IF EXISTS \(index)"), logger: logger)
                    }
                }
                for statement in migration.concurrentStatements ?? [] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    """
                    INSERT INTO wallet_schema_migrations (version, name, compatible_with)
                    VALUES (\(migration.version), \(migration.name), \(migration.compatibleWith))
                    ON CONFLICT (version) DO NOTHING
                    """,
                    logger: logger)
            }
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(hashtextextended(\(lock), 0))", logger: logger)
            throw error
        }
        try await connection.query("SELECT pg_advisory_unlock(hashtextextended(\(lock), 0))", logger: logger)
    }

    /// Applies a retirement (`Migration.retiresOlderBuilds`) in a transaction of its own under the migrations' lock,
    /// unless a session of a build older than it allows is connected: then it logs which and returns false, and the
    /// operator runs `wallet-worker migrate --retire-older-builds` again once those replicas are gone.
    private static func retire(
        _ migration: Migration, on connection: PostgresConnection, location: PostgresLocation, timeout: Duration,
        logger: Logger
    ) async throws -> Bool {
        try await beginUnderMigrationLock(on: connection, location: location, timeout: timeout, logger: logger)
        let recorded = try await recordedMigrations(on: connection, logger: logger, hasCompatibility: true)
        if !recorded.contains(where: { $0.version == migration.version }) {
            let older = try await olderBuildSessions(below: migration.compatibleWith, on: connection, logger: logger)
            guard older.isEmpty else {
                try await connection.query("ROLLBACK", logger: logger)
                logger.warning(
                    """
                    a schema migration that retires older builds is not applied while a session of such a build is \
                    connected: stop those replicas, then run `wallet-worker migrate --retire-older-builds` again; \
                    the worker runs without it
                    """,
                    metadata: [
                        "migration": "\(versionName(migration.version))",
                        "older sessions": "\(older.joined(separator: ", "))",
                    ])
                return false
            }
            try await apply(migration, on: connection, logger: logger)
        }
        try await connection.query("COMMIT", logger: logger)
        return true
    }

    /// The sessions on the server of builds that know no schema version from `version` on, as "application name
    /// (pid)": builds before this one name themselves `wallet-worker`, this one and later `wallet-worker vN`, N the
    /// newest version the build knows (`PostgresConnectionSettings`). Every session on this database counts,
    /// whatever its role or schema (a deployment in another schema only makes the check wait). A safety net under
    /// the operator's word, not a proof: a replica whose pool has no connection open at this moment (an idle pool
    /// closes them after a minute) is not seen.
    static func olderBuildSessions(
        below version: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> [String] {
        var sessions: [String] = []
        for try await row in try await connection.query(
            """
            SELECT application_name, pid FROM pg_stat_activity
            WHERE pid <> pg_backend_pid() AND datname = current_database()
              AND (application_name = 'wallet-worker'
                   OR substring(application_name FROM '^wallet-worker v([0-9]{1,9})$')::int < \(version))
            ORDER BY pid
            """, logger: logger)
        {
            let (name, pid) = try row.decode((String, Int32).self)
            sessions.append("\(name) (\(pid))")
        }
        return sessions
    }

    /// The application name of this build's sessions, by which `olderBuildSessions` tells builds apart.
    static var applicationName: String { "wallet-worker v\(newestVersion)" }

    struct RecordedMigration {
        var version: Int
        /// Its own version when the row predates the column.
        var compatibleWith: Int
    }

    static func recordedMigrations(
        on connection: PostgresConnection, logger: Logger, hasCompatibility: Bool
    ) async throws -> [RecordedMigration] {
        var recorded: [RecordedMigration] = []
        if hasCompatibility {
            for try await row in try await connection.query(
                "SELECT version, compatible_with FROM wallet_schema_migrations ORDER BY version", logger: logger)
            {
                let (version, compatibleWith) = try row.decode((Int, Int?).self)
                recorded.append(RecordedMigration(version: version, compatibleWith: compatibleWith ?? version))
            }
        } else {
            for try await row in try await connection.query(
                "SELECT version FROM wallet_schema_migrations ORDER BY version", logger: logger)
            {
                let version = try row.decode(Int.self)
                recorded.append(RecordedMigration(version: version, compatibleWith: version))
            }
        }
        return recorded
    }

    /// The migrations recorded in the database, read without a transaction of its own and without creating
    /// anything: a database never migrated (no `wallet_schema_migrations` on the search path) has none.
    static func status(on connection: PostgresConnection, logger: Logger) async throws -> SchemaStatus {
        var tableExists = false
        for try await row in try await connection.query(
            "SELECT to_regclass('wallet_schema_migrations') IS NOT NULL", logger: logger)
        {
            tableExists = try row.decode(Bool.self)
        }
        var recorded: [RecordedMigration] = []
        if tableExists {
            var hasCompatibility = false
            for try await _ in try await connection.query(
                """
                SELECT 1 FROM pg_attribute
                WHERE attrelid = to_regclass('wallet_schema_migrations') AND attname = 'compatible_with' AND NOT attisdropped
                """, logger: logger)
            {
                hasCompatibility = true
            }
            recorded = try await recordedMigrations(on: connection, logger: logger, hasCompatibility: hasCompatibility)
        }
        let known = Set(migrations.map(\.version))
        return SchemaStatus(
            applied: recorded.map { versionName($0.version) },
            known: migrations.map { versionName($0.version) },
            optional: migrations.filter { !$0.isRequired }.map { versionName($0.version) },
            compatibleUnknown: recorded.filter { !known.contains($0.version) && $0.compatibleWith <= newestVersion }
                .map { versionName($0.version) },
            retirements: migrations.filter(\.retiresOlderBuilds).map { versionName($0.version) })
    }

    /// How a version is shown: `v1`, as the SQLite store names its migrations.
    static func versionName(_ version: Int) -> String { "v\(version)" }
}

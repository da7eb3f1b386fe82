import Logging
import PostgresNIO

/// The store's schema as versioned migrations, applied by the store itself at start.
///
/// One transaction does it all, under a transaction-scoped advisory lock keyed by the schema: replicas starting
/// together queue on the lock, the first migrates, the others find the work done. A database migrated by a newer
/// build (a version in `wallet_schema_migrations` this build does not know) is refused: that build's schema may
/// mean something this code would silently get wrong. Never edit a shipped migration: append a new version.
enum PostgresSchema {
    struct Migration {
        var version: Int
        var name: String
        /// One statement each (the extended protocol takes one statement per query).
        var statements: [String]
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
            ]),
        // v1's index filtered the kind from the heap: an auxiliary view of a card with thousands of primary records
        // read every one of them, on every TNS. Each kind is now one range (SQLite's v3 made the same change).
        // Writes to the table wait while it builds (about 1 s per million records: README).
        Migration(
            version: 2, name: "transactions index by card and kind",
            statements: [
                """
                CREATE INDEX transactions_newest_first_by_kind
                    ON transactions (digital_card_id, is_auxiliary, instant DESC, stored_sequence DESC)
                """,
                "DROP INDEX transactions_newest_first",
            ]),
    ]

    /// Creates the schema (when `location.schema` names one) and applies the missing migrations, in one transaction.
    /// On a failure the caller closes the connection, which rolls the transaction back.
    /// - Parameter lastVersion: the newest migration to apply (tests build a database as an older build left it).
    /// - Throws: a permanent `StoreError` when the database holds a version this build does not know.
    static func migrate(
        on connection: PostgresConnection, location: PostgresLocation, timeout: Duration, logger: Logger,
        through lastVersion: Int = .max
    ) async throws {
        try await connection.query("BEGIN", logger: logger)
        // The connection's statement_timeout is the batches'; the migration has its own.
        try await connection.query(
            PostgresQuery(unsafeSQL: "SET LOCAL statement_timeout = \(max(1, timeout.wholeMilliseconds))"), logger: logger)
        // Keyed by schema: stores in different schemas of one database migrate independently.
        let lockName = "wallet-notification-worker migrations " + (location.schema ?? "(search_path)")
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(lockName), 0))", logger: logger)
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
        var applied = Set<Int>()
        for try await row in try await connection.query("SELECT version FROM wallet_schema_migrations", logger: logger) {
            applied.insert(try row.decode(Int.self))
        }
        let known = Set(migrations.map(\.version))
        let unknown = applied.subtracting(known).sorted()
        guard unknown.isEmpty else {
            throw StoreError(
                .permanent,
                "PostgreSQL schema of \(location.shortName) is newer than this build (unknown migrations: "
                    + "\(unknown.map(String.init).joined(separator: ", "))): run a newer worker")
        }
        for migration in migrations where !applied.contains(migration.version) && migration.version <= lastVersion {
            for statement in migration.statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await connection.query(
                "INSERT INTO wallet_schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                logger: logger)
        }
        try await connection.query("COMMIT", logger: logger)
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
        var applied: [Int] = []
        if tableExists {
            for try await row in try await connection.query(
                "SELECT version FROM wallet_schema_migrations ORDER BY version", logger: logger)
            {
                applied.append(try row.decode(Int.self))
            }
        }
        return SchemaStatus(applied: applied.map(versionName), known: migrations.map { versionName($0.version) })
    }

    /// How a version is shown: `v1`, as the SQLite store names its migrations.
    static func versionName(_ version: Int) -> String { "v\(version)" }
}

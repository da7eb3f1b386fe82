import Foundation
import GRDB
import WalletRouting

/// The store's schema as versioned GRDB migrations. Relational and readable with the `sqlite3` CLI.
///
/// Never edit a shipped migration: append a new one ("v2", ...). Each records, in `wallet_schema_compatibility`,
/// the oldest schema version a build must know to use a file that has it: an index leaves it at the previous
/// version, so an older build runs on the newer file (a rollback). A file migrated by a newer build with a
/// migration this build does not know and that does not declare it compatible is refused at open, see
/// `SQLiteWalletStore`. An index build (`optional`) runs in `wallet-worker migrate`, not at a worker's start on a
/// file with data (SQLite holds every write while it builds).
enum SQLiteSchema {
    /// The oldest schema version a build must know to use a file with each migration applied.
    static let compatibility: [String: Int] = ["v1": 1, "v2": 2, "v3": 2, "v4": 2, "v5": 5]
    /// Index builds: a build runs without them.
    static let optional: Set<String> = ["v3"]
    /// This build's newest schema version.
    static let newestVersion = 5
    /// From this migration on, the recorded results are written compressed (`RecordedResultsEncoding`, version 2).
    static let compressedResults = "v5"

    static func version(_ identifier: String) -> Int? {
        identifier.hasPrefix("v") ? Int(identifier.dropFirst()) : nil
    }

    /// Records the compatibility of every migration applied that this build knows (rows of newer builds stay).
    static func recordCompatibility(_ db: Database, applied: Set<String>) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS wallet_schema_compatibility (
                    identifier      TEXT PRIMARY KEY NOT NULL,
                    compatible_with INTEGER NOT NULL
                ) WITHOUT ROWID
                """)
        for (identifier, compatibleWith) in compatibility where applied.contains(identifier) {
            try db.execute(
                sql: "INSERT OR IGNORE INTO wallet_schema_compatibility (identifier, compatible_with) VALUES (?, ?)",
                arguments: [identifier, compatibleWith])
        }
    }

    /// The compatibility newer builds recorded for migrations this build does not know (none recorded: not
    /// compatible).
    static func compatibleUnknown(_ db: Database, unknown: [String]) throws -> [String] {
        guard !unknown.isEmpty, try db.tableExists("wallet_schema_compatibility") else { return [] }
        var compatible: [String] = []
        for identifier in unknown {
            let value = try Int.fetchOne(
                db, sql: "SELECT compatible_with FROM wallet_schema_compatibility WHERE identifier = ?",
                arguments: [identifier])
            if let value, value <= newestVersion { compatible.append(identifier) }
        }
        return compatible
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // Text primary keys: WITHOUT ROWID keeps each table a single B-tree keyed by the id.
            try db.execute(
                sql: """
                    CREATE TABLE cards (
                        digital_card_id   TEXT PRIMARY KEY NOT NULL,
                        state             TEXT NOT NULL CHECK (state IN ('active', 'suspended', 'deleted')),
                        tokenized_card_id TEXT,
                        key_type          TEXT NOT NULL CHECK (key_type IN ('SUK', 'LUK')),
                        payments_left     INTEGER,           -- NULL with keys_expire_at: no payment keys issued
                        keys_expire_at    REAL               -- seconds since the Unix epoch
                    ) WITHOUT ROWID;

                    -- stored_sequence is the rowid: AUTOINCREMENT keeps it strictly increasing for ever, so it
                    -- breaks ties between equal instants (the later stored first).
                    CREATE TABLE transactions (
                        stored_sequence      INTEGER PRIMARY KEY AUTOINCREMENT,
                        digital_card_id      TEXT NOT NULL,
                        record_id            TEXT NOT NULL,
                        date                 TEXT NOT NULL,  -- as received (ISO 8601 with zone)
                        instant              REAL,           -- date as seconds since the epoch, for ordering
                        status               TEXT NOT NULL,
                        type                 TEXT NOT NULL,
                        currency_code        TEXT NOT NULL,
                        amount               TEXT NOT NULL,  -- the JSON number literal, exactly as received
                        display_amount       TEXT,
                        merchant_name        TEXT,
                        merchant_type        TEXT,
                        merchant_postal_code TEXT,
                        terminal_id          TEXT,
                        merchant_id          TEXT,
                        is_auxiliary         INTEGER NOT NULL CHECK (is_auxiliary IN (0, 1)),
                        UNIQUE (digital_card_id, record_id)
                    );
                    -- Serves newestTransactions: one range scan in the order the router reads, no sort.
                    CREATE INDEX transactions_newest_first
                        ON transactions (digital_card_id, instant DESC, stored_sequence DESC);

                    CREATE TABLE installations (
                        installation_id TEXT PRIMARY KEY NOT NULL,
                        platform        TEXT NOT NULL,
                        push_channel    TEXT NOT NULL,
                        tags            TEXT NOT NULL DEFAULT '[]'  -- a JSON array of strings, in order
                    ) WITHOUT ROWID;

                    CREATE TABLE processed_messages (
                        message_id      TEXT PRIMARY KEY NOT NULL,
                        recorded_at     REAL NOT NULL,      -- seconds since the Unix epoch
                        outcome         TEXT NOT NULL,
                        sender          TEXT,
                        digital_card_id TEXT
                    ) WITHOUT ROWID;
                    CREATE INDEX processed_messages_recorded_at ON processed_messages (recorded_at);

                    -- The recorded results, replayed verbatim: position is the publication order.
                    CREATE TABLE processed_results (
                        message_id        TEXT NOT NULL
                            REFERENCES processed_messages (message_id) ON DELETE CASCADE,
                        position          INTEGER NOT NULL,
                        exchange          TEXT NOT NULL,
                        routing_key       TEXT NOT NULL,
                        body              BLOB,
                        result_message_id TEXT,
                        correlation_id    TEXT,
                        type              TEXT NOT NULL,
                        traceparent       TEXT,
                        PRIMARY KEY (message_id, position)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v2") { db in
            try migrateProcessedMessagesToOneRowEach(db)
        }
        migrator.registerMigration("v3") { db in
            // The newest records of one kind (primary or auxiliary) as one range of the index: the store's cache
            // reads both kinds of a card at once (SQLiteStateCache.History), and with the kind outside the index
            // the auxiliary half walked every record of the card. The view of all records merges the two ranges.
            // Replaces the v1 index: the same number of index writes per stored record.
            try db.execute(
                sql: """
                    CREATE INDEX transactions_newest_first_by_kind
                        ON transactions (digital_card_id, is_auxiliary, instant DESC, stored_sequence DESC);
                    DROP INDEX transactions_newest_first;
                    """)
        }
        migrator.registerMigration("v4") { db in
            // Messages dead-lettered after their effects were committed, until a replay delivers their results
            // (`UndeliveredResults`). A table of its own, written outside the batches: an older build runs on the
            // file without knowing it (compatible with v2), and the retention sweep deletes a note with its record.
            try db.execute(
                sql: """
                    CREATE TABLE undelivered_results (
                        message_id       TEXT PRIMARY KEY NOT NULL,
                        dead_lettered_at REAL NOT NULL,  -- seconds since the Unix epoch
                        reason           TEXT NOT NULL,
                        error            TEXT NOT NULL
                    ) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("v5") { _ in
            // No table changes: from here on the recorded results are written compressed (`RecordedResultsEncoding`
            // version 2), which a build before this one cannot read. Compatible with 5 only, so such a build refuses
            // the file at open instead of failing on the first replay of a compressed record. Values written before
            // stay as they are (every build since reads both) until the retention sweep deletes them.
        }
        return migrator
    }

    /// v2: one row per processed message with its results in one blob (`RecordedResultsEncoding`), in a rowid
    /// table. v1's `processed_results` (one WITHOUT ROWID row per result, 1.3 rows of ~900 bytes per message)
    /// made every record a random insert into a B-tree of large rows; now a record appends to the table and adds
    /// one small entry to the `message_id` index. v1's records are carried over, results and order unchanged.
    private static func migrateProcessedMessagesToOneRowEach(_ db: Database) throws {
        try db.execute(
            sql: """
                -- sequence is the rowid: rows are appended in the order they are recorded.
                CREATE TABLE processed_messages_v2 (
                    sequence        INTEGER PRIMARY KEY,
                    message_id      TEXT NOT NULL UNIQUE,
                    recorded_at     REAL NOT NULL,      -- seconds since the Unix epoch
                    outcome         TEXT NOT NULL,
                    sender          TEXT,
                    digital_card_id TEXT,
                    results         BLOB NOT NULL       -- RecordedResultsEncoding: replayed verbatim, in order
                );
                """)
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT m.message_id, m.recorded_at, m.outcome, m.sender, m.digital_card_id,
                       r.position, r.exchange, r.routing_key, r.body, r.result_message_id, r.correlation_id,
                       r.type, r.traceparent
                FROM processed_messages AS m
                LEFT JOIN processed_results AS r ON r.message_id = m.message_id
                ORDER BY m.recorded_at, m.message_id, r.position
                """)
        let insert = try db.makeStatement(
            sql: """
                INSERT INTO processed_messages_v2 (message_id, recorded_at, outcome, sender, digital_card_id, results)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
        var pending: (row: Row, results: [OutboundResult])?
        func flush() throws {
            guard let (row, results) = pending else { return }
            try insert.execute(arguments: [
                row["message_id"], row["recorded_at"], row["outcome"], row["sender"], row["digital_card_id"],
                Data(RecordedResultsEncoding.encode(results)),
            ])
            pending = nil
        }
        while let row = try rows.next() {
            let messageID: String = row["message_id"]
            if pending?.row["message_id"] != messageID {
                try flush()
                pending = (row.copy(), [])
            }
            // A message that published nothing (ignored) has one row with NULL result columns.
            guard row["position"] as Int? != nil else { continue }
            pending?.results.append(
                OutboundResult(
                    exchange: row["exchange"], routingKey: row["routing_key"],
                    body: [UInt8]((row["body"] as Data?) ?? Data()),
                    properties: OutboundProperties(
                        messageID: row["result_message_id"], correlationID: row["correlation_id"],
                        type: row["type"], traceparent: row["traceparent"])))
        }
        try flush()
        try db.execute(
            sql: """
                DROP TABLE processed_results;
                DROP TABLE processed_messages;
                ALTER TABLE processed_messages_v2 RENAME TO processed_messages;
                CREATE INDEX processed_messages_recorded_at ON processed_messages (recorded_at);
                """)
    }
}

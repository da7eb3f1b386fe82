import Foundation
import Logging
import NIOCore
import PostgresNIO
import WalletRouting

/// The SQL of a batch: a few set-based statements that fetch what the batch reads and write what it changed.
/// Every batch is one `READ COMMITTED` transaction on one connection; rows go in and out as arrays (`unnest`),
/// so a batch costs five round trips whatever its size: `BEGIN`, the cards and processed ids, the records and
/// histories, the writes, `COMMIT` (`fetch`, `write`; a sixth reads the result rows of replayed records that a
/// build before schema v5 wrote).
///
/// Every read by key is a lateral subquery per key, `unnest($1) AS k CROSS JOIN LATERAL (SELECT … WHERE key =
/// k.key FOR UPDATE | OFFSET 0)`: the lock or the `OFFSET 0` keeps the subquery from being flattened into a join, so
/// the planner prices one lookup per key against a scan of the whole table per key, and the index wins on any table
/// past a page or two. Written as `key = ANY($1)` or a join, the reads were planned as whole-table scans (a hashed
/// `= ANY` filter or a hash join) while a table had a few thousand rows, and more often before its first `ANALYZE`:
/// in the profile's run 1,376 scans read 17 million rows (Benchmarks/README.md, "Issue 38").
///
/// Each statement is prepared once per connection under its name (`PreparedBatchStatement`): the names are at the
/// end of this file, the texts beside the functions that bind and decode them.
struct PostgresBatchStatements {
    let connection: PostgresConnection
    let logger: Logger
    private static let columns = StoredColumns(store: "PostgreSQL store")

    // MARK: - Transaction

    func begin(readOnly: Bool = false) async throws {
        if readOnly {
            try await connection.query("BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY", logger: logger)
        } else {
            try await connection.query("BEGIN ISOLATION LEVEL READ COMMITTED", logger: logger)
        }
    }

    func commit() async throws {
        try await connection.query("COMMIT", logger: logger)
    }

    func rollback() async throws {
        try await connection.query("ROLLBACK", logger: logger)
    }

    // MARK: - Reads

    /// Fetches `keys` into `snapshot` in at most two statements (and a third when the batch holds replays):
    ///
    /// 1. The cards and the processed ids. The cards come first: their row locks are taken in sorted order (two
    ///    batches lock their common cards in the same order, so they queue instead of deadlocking). A processed id
    ///    read in this statement's snapshot may miss a record another replica committed while this one waited for a
    ///    card lock; the batch then records the id again, which the primary key refuses, and is retried as a replay.
    /// 2. The records and the histories, in a statement of their own that starts after the locks are held, so it
    ///    sees whatever was stored under them: a history read in the first statement's snapshot could miss a record
    ///    another batch stored on the card and committed while this one waited, and nothing would tell.
    ///
    /// Without `lock` (a dry run), the cards are read as committed and stay free for the worker.
    func fetch(_ keys: PostgresBatchKeys, into snapshot: inout PostgresBatchSnapshot, lock: Bool = true) async throws {
        if !keys.cards.isEmpty || !keys.messageIDs.isEmpty {
            let found = try await cardsAndDecisions(
                cards: keys.cards.sorted(), messageIDs: keys.messageIDs.sorted(), lock: lock)
            for id in keys.cards { snapshot.cards[id] = .some(found.cards[id]) }
            for id in keys.messageIDs { snapshot.decisions[id] = .some(found.decisions[id]) }
        }
        if !keys.records.isEmpty || !keys.histories.isEmpty {
            let records = Array(keys.records)
            let requests = keys.histories.map { (key: $0.key, limit: $0.value) }
            let found = try await recordsAndHistories(records: records, histories: requests)
            for key in records { snapshot.records[key] = found.records.contains(key) }
            for (index, request) in requests.enumerated() {
                snapshot.histories[request.key] = (request.limit, found.histories[index] ?? [])
            }
        }
    }

    /// The cards that exist among `ids`; with `lock`, row-locked in the order of `ids` until the transaction ends.
    func cards(_ ids: [String], lock: Bool) async throws -> [String: CardRecord] {
        try await cardsAndDecisions(cards: ids, messageIDs: [], lock: lock).cards
    }

    /// The recorded decisions of the processed ids among `ids`; with `lock`, their records are share-locked until the
    /// transaction ends.
    func decisions(_ ids: [String], lock: Bool) async throws -> [String: Decision] {
        try await cardsAndDecisions(cards: [], messageIDs: ids, lock: lock).decisions
    }

    /// The cards that exist among `cards` and the recorded decisions of the processed ids among `messageIDs`; with
    /// `lock`, the cards are row-locked in the order given and the records share-locked, until the transaction ends.
    ///
    /// A record's results are its `results` value (schema v5). A record an older build wrote has none: its results
    /// are rows of `processed_results`, read by a second statement only for such records (a replay of one: rare,
    /// and only until the retention sweep has deleted the older builds' records). One join of both tables was
    /// planned as a hash join over all of `processed_results` whenever the planner lacked statistics (35.9 ms at
    /// 89,000 results). The share lock keeps the two consistent: the retention sweep skips locked records
    /// (`expire`), so a record found by the first is not deleted with its results before the second reads them.
    func cardsAndDecisions(cards ids: [String], messageIDs: [String], lock: Bool) async throws
        -> (cards: [String: CardRecord], decisions: [String: Decision])
    {
        var bindings = PostgresBindings()
        bindings.append(ids)
        bindings.append(messageIDs)
        let rows =
            lock
            ? try await run(CardsAndProcessedForUpdate.self, bindings)
            : try await run(CardsAndProcessedAsCommitted.self, bindings)
        var cards: [String: CardRecord] = [:]
        var decisions: [String: Decision] = [:]
        var recordedAsRows: [String] = []
        for try await row in rows {
            var columns = PostgresRowReader(row)
            let isCard = try columns.required(Bool.self)
            let id = try columns.required(String.self)
            let stateOrOutcome = try columns.required(String.self)
            let tokenizedCardIdOrSender = try columns.next(String.self)
            let keyTypeOrCard = try columns.next(String.self)
            let paymentsLeft = try columns.next(Int.self)
            let expiresAt = try columns.next(Double.self)
            let results = try columns.next(ByteBuffer.self)
            if isCard {
                cards[id] = CardRecord(
                    digitalCardId: id,
                    state: try Self.columns.decode(CardState.self, stateOrOutcome, column: "cards.state"),
                    tokenizedCardId: tokenizedCardIdOrSender,
                    keyType: try Self.columns.decode(KeyType.self, keyTypeOrCard ?? "", column: "cards.key_type"),
                    paymentKeys: paymentsLeft.flatMap { left in
                        expiresAt.map { PaymentKeyInfo(numberOfPaymentsLeft: left, expiresAt: $0) }
                    })
            } else {
                let outcome = try Self.columns.decode(
                    Outcome.self, stateOrOutcome, column: "processed_messages.outcome")
                if let results {
                    decisions[id] = try Decision.recorded(
                        results: results.withUnsafeReadableBytes { try RecordedResultsEncoding.decode($0) },
                        outcome: outcome, sender: tokenizedCardIdOrSender, digitalCardId: keyTypeOrCard)
                } else {
                    recordedAsRows.append(id)
                    decisions[id] = Decision.recorded(
                        results: [], outcome: outcome, sender: tokenizedCardIdOrSender, digitalCardId: keyTypeOrCard)
                }
            }
        }
        guard !recordedAsRows.isEmpty else { return (cards, decisions) }
        var found = PostgresBindings()
        found.append(recordedAsRows)
        for try await row in try await run(RecordedResults.self, found) {
            let (id, exchange, routingKey, body, resultID, correlationID, type, traceparent) = try row.decode(
                (String, String, String, ByteBuffer, String?, String?, String, String?).self)
            decisions[id]?.results.append(
                OutboundResult(
                    exchange: exchange, routingKey: routingKey, body: Array(body.readableBytesView),
                    properties: OutboundProperties(
                        messageID: resultID, correlationID: correlationID, type: type, traceparent: traceparent)))
        }
        return (cards, decisions)
    }

    /// The cards among $1, then the records of the processed ids among $2, as rows of one shape: whether the row is a
    /// card, the key, then the card's state, tokenized card id, key type and payment keys, or the record's outcome,
    /// sender, card and results (NULL in a record of a build before schema v5). `locking`, each card is row-locked as
    /// it is found, so in $1's order (a lateral subquery runs once per row of the `unnest`, in the array's order, and
    /// the cards' branch runs to its end before the other), and each record share-locked.
    static func cardsAndProcessedLookup(locking: Bool) -> String {
        """
        SELECT true, c.digital_card_id, c.state, c.tokenized_card_id, c.key_type, c.payments_left, c.keys_expire_at,
            NULL::bytea
        FROM unnest($1::text[]) AS k(digital_card_id)
        CROSS JOIN LATERAL (
            SELECT * FROM cards WHERE cards.digital_card_id = k.digital_card_id \(locking ? "FOR UPDATE" : "OFFSET 0")
        ) AS c
        UNION ALL
        SELECT false, m.message_id, m.outcome, m.sender, m.digital_card_id, NULL, NULL, m.results
        FROM unnest($2::text[]) AS k(message_id)
        CROSS JOIN LATERAL (
            SELECT * FROM processed_messages
            WHERE processed_messages.message_id = k.message_id \(locking ? "FOR SHARE" : "OFFSET 0")
        ) AS m
        """
    }

    /// The recorded results of the processed ids $1 recorded as rows (by a build before schema v5, or by this one
    /// beside their value until v6), by id and position.
    static let recordedResults = """
        SELECT r.message_id, r.exchange, r.routing_key, r.body, r.result_message_id, r.correlation_id, r.type,
            r.traceparent
        FROM unnest($1::text[]) AS k(message_id)
        CROSS JOIN LATERAL (
            SELECT * FROM processed_results WHERE processed_results.message_id = k.message_id OFFSET 0
        ) AS r
        ORDER BY r.message_id, r.position
        """

    /// For each request, the card's newest records (of the kind asked, at most `limit`), newest first, ties: the
    /// later stored first; by request index.
    func histories(_ requests: [(key: HistoryKey, limit: Int)]) async throws -> [Int: [TransactionRecord]] {
        try await recordsAndHistories(records: [], histories: requests).histories
    }

    /// Which of `records` are stored, and for each history request the card's newest records (of the kind asked, at
    /// most `limit`), newest first, ties: the later stored first; by request index. One statement.
    func recordsAndHistories(records: [RecordKey], histories requests: [(key: HistoryKey, limit: Int)]) async throws
        -> (records: Set<RecordKey>, histories: [Int: [TransactionRecord]])
    {
        var bindings = PostgresBindings()
        bindings.append(records.map(\.digitalCardId))
        bindings.append(records.map(\.recordId))
        bindings.append(requests.map(\.key.digitalCardId))
        bindings.append(PostgresArrayColumn(requests.map(\.key.auxiliary)))
        bindings.append(requests.map(\.limit))
        var found = Set<RecordKey>()
        var histories: [Int: [TransactionRecord]] = [:]
        for try await row in try await run(RecordsAndHistories.self, bindings) {
            var columns = PostgresRowReader(row)
            let ordinal = try columns.required(Int.self)
            let id = try columns.required(String.self)
            guard ordinal > 0 else {
                found.insert(records[-ordinal - 1])
                continue
            }
            // The arguments are read left to right, in the statement's column order.
            histories[ordinal - 1, default: []].append(
                TransactionRecord(
                    id: id, date: try columns.required(), instant: try columns.required(),
                    status: try columns.required(), type: try columns.required(),
                    currencyCode: try columns.required(),
                    amount: JSONNumber(validatedLiteral: try columns.required()), displayAmount: try columns.next(),
                    merchantName: try columns.next(), merchantType: try columns.next(),
                    merchantPostalCode: try columns.next(), terminalID: try columns.next(),
                    merchantID: try columns.next(), isAuxiliaryTransaction: try columns.required()))
        }
        return (found, histories)
    }

    /// The stored records among ($1 cards, $2 record ids), then the history reads ($3 cards, $4 kinds: true
    /// auxiliary, false primary, NULL both; $5 limits), as rows of one shape: a stored record is its request's
    /// ordinal negated and its id, every other column NULL; a history's record is its request's ordinal and the
    /// record. Each history kind is one range of `transactions_newest_first_by_kind`, read only when asked for (a
    /// one-time filter on the request's kind): no record of the other kind is read, and the view of both merges the
    /// two ranges.
    static let recordsAndNewestTransactions = """
        SELECT -k.ordinal AS ordinal, t.record_id, NULL::text, NULL::float8 AS instant, NULL::text, NULL::text,
               NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
               NULL::bool, NULL::int8 AS stored_sequence
        FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(digital_card_id, record_id, ordinal)
        CROSS JOIN LATERAL (
            SELECT record_id FROM transactions
            WHERE transactions.digital_card_id = k.digital_card_id AND transactions.record_id = k.record_id
            OFFSET 0
        ) AS t
        UNION ALL
        SELECT k.ordinal, t.record_id, t.date, t.instant, t.status, t.type, t.currency_code, t.amount,
               t.display_amount, t.merchant_name, t.merchant_type, t.merchant_postal_code, t.terminal_id,
               t.merchant_id, t.is_auxiliary, t.stored_sequence
        FROM unnest($3::text[], $4::bool[], $5::int8[]) WITH ORDINALITY AS k(digital_card_id, auxiliary, row_limit, ordinal)
        CROSS JOIN LATERAL (
            SELECT * FROM (
                (SELECT * FROM transactions AS p
                 WHERE p.digital_card_id = k.digital_card_id AND NOT p.is_auxiliary AND k.auxiliary IS NOT TRUE
                 ORDER BY p.instant DESC, p.stored_sequence DESC
                 LIMIT k.row_limit)
                UNION ALL
                (SELECT * FROM transactions AS a
                 WHERE a.digital_card_id = k.digital_card_id AND a.is_auxiliary AND k.auxiliary IS NOT FALSE
                 ORDER BY a.instant DESC, a.stored_sequence DESC
                 LIMIT k.row_limit)
            ) AS both_kinds
            ORDER BY both_kinds.instant DESC, both_kinds.stored_sequence DESC
            LIMIT k.row_limit
        ) AS t
        ORDER BY ordinal, instant DESC, stored_sequence DESC
        """

    func installation(_ installationId: String) async throws -> Installation? {
        let query: PostgresQuery =
            "SELECT platform, push_channel, tags::text FROM installations WHERE installation_id = \(installationId)"
        for try await row in try await connection.query(query, logger: logger) {
            let (platform, pushChannel, tags) = try row.decode((String, String, String).self)
            return Installation(
                installationId: installationId, platform: platform, pushChannel: pushChannel,
                tags: try Self.columns.decodeTags(tags))
        }
        return nil
    }

    // MARK: - Writes

    /// Writes what a routing pass changed in one statement (`WriteBatch`): cards, records, installations, then the
    /// processed ids with their results. Cards and processed ids go in sorted (two batches sharing ids write them in
    /// the same order). The results go as `format` says: compressed or not (schema v7), and with `rows` (a database
    /// without schema v6, where builds before v5 may run beside this one) each result as a row of `processed_results`
    /// too (`WriteBatchWithResultRows`).
    /// - Throws: `PostgresConflict` when another transaction created one of the batch's new cards after this one
    ///   found it absent (the batch routed against a stale "absent" and is retried; the statement's other writes are
    ///   rolled back with the batch); a unique violation (23505) when another transaction recorded one of the
    ///   batch's message ids first (retried: then it is a replay).
    func write(_ pass: PostgresBatchOverlay, now: Date, format: PostgresResultsFormat) async throws {
        // A batch of replays changes and records nothing.
        guard
            !pass.changedCards.isEmpty || !pass.storedRecords.isEmpty || !pass.installations.isEmpty
                || !pass.recorded.isEmpty
        else { return }
        let bindings = try Self.writeColumns(pass, now: now, format: format)
        let rows =
            format.rows
            ? try await run(WriteBatchWithResultRows.self, bindings) : try await run(WriteBatch.self, bindings)
        // The rows returned are the changed cards: each with whether the statement inserted it.
        for try await row in rows {
            let (id, inserted) = try row.decode((String, Bool).self)
            guard inserted || pass.existed(id) else {
                throw PostgresConflict(description: "a card the batch found absent was created by another transaction")
            }
        }
    }

    /// The parameters of `batchWrite` for what `pass` changed.
    static func writeColumns(_ pass: PostgresBatchOverlay, now: Date, format: PostgresResultsFormat) throws
        -> PostgresBindings
    {
        let cards = pass.changedCards.keys.sorted().map { pass.changedCards[$0]! }
        let installationIDs = pass.installations.keys.sorted()
        let upserted = installationIDs.compactMap { pass.installations[$0]! }
        let deleted = installationIDs.filter { pass.installations[$0]! == nil }
        var bindings = cardColumns(cards)
        appendRecordColumns(pass.storedRecords, to: &bindings)
        bindings.append(PostgresArrayColumn(upserted) { $0.installationId })
        bindings.append(PostgresArrayColumn(upserted) { $0.platform })
        bindings.append(PostgresArrayColumn(upserted) { $0.pushChannel })
        bindings.append(try upserted.map { try StoredColumns.encodeTags($0.tags) })
        bindings.append(deleted)
        appendRecordedColumns(
            pass.recorded.sorted { $0.messageID < $1.messageID }, now: now, format: format, to: &bindings)
        return bindings
    }

    /// A batch's writes ($1…$6 the changed cards, $7…$21 the stored records, $22…$25 the upserted installations,
    /// $26 the deleted ones, $27…$32 the processed ids with their results; with `resultRows`, $33…$41 the results as
    /// rows), each a data-modifying part of one statement: one round trip instead of one per kind. An empty array
    /// writes nothing.
    ///
    /// The cards are upserted: those the batch found, row-locked since, are updated, the others inserted, each found
    /// through the primary key whatever the planner knows (an `UPDATE … FROM unnest(…)` was a hash join over the
    /// whole table while it had a few thousand rows). The statement returns each card's id and whether it was
    /// inserted (`xmax` is 0 on a row this statement inserted, this transaction's id on one it updated).
    /// Records are stored in the batch's order, so `stored_sequence` follows it: later stored, later sequence.
    ///
    /// PostgreSQL runs the cards' part first (the statement's result reads it), then the others at the statement's
    /// end, the last written first (`ExecPostprocessPlan`; checked in psql): so they are written here in the reverse
    /// of the order they run, which is the order the separate statements had: records, installations, processed
    /// ids, result rows. A duplicate message id fails on `processed_messages` first, and a replica of an older build
    /// takes its locks in the same order. SQL does not promise any order; another would at worst let two racing
    /// batches deadlock, which the server detects and the store retries.
    static func batchWrite(resultRows: Bool) -> String {
        let rows = """
            ), recorded_result_rows AS (
                INSERT INTO processed_results (
                    message_id, position, exchange, routing_key, body, result_message_id, correlation_id, type,
                    traceparent)
                SELECT * FROM unnest($33::text[], $34::int8[], $35::text[], $36::text[], $37::bytea[], $38::text[],
                                     $39::text[], $40::text[], $41::text[])

            """
        return """
            WITH changed_cards AS (
                INSERT INTO cards AS c (digital_card_id, state, tokenized_card_id, key_type, payments_left, keys_expire_at)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::float8[])
                ON CONFLICT (digital_card_id) DO UPDATE SET
                    state = excluded.state, tokenized_card_id = excluded.tokenized_card_id, key_type = excluded.key_type,
                    payments_left = excluded.payments_left, keys_expire_at = excluded.keys_expire_at
                RETURNING c.digital_card_id, c.xmax = 0 AS inserted
            \(resultRows ? rows : "")), recorded_messages AS (
                INSERT INTO processed_messages (message_id, recorded_at, outcome, sender, digital_card_id, results)
                SELECT u.message_id, $28::timestamptz, u.outcome, u.sender, u.digital_card_id, u.results
                FROM unnest($27::text[], $29::text[], $30::text[], $31::text[], $32::bytea[])
                    AS u(message_id, outcome, sender, digital_card_id, results)
            ), deleted_installations AS (
                DELETE FROM installations WHERE installation_id = ANY($26::text[])
            ), upserted_installations AS (
                INSERT INTO installations (installation_id, platform, push_channel, tags)
                SELECT u.installation_id, u.platform, u.push_channel, u.tags::jsonb
                FROM unnest($22::text[], $23::text[], $24::text[], $25::text[])
                    AS u(installation_id, platform, push_channel, tags)
                ON CONFLICT (installation_id) DO UPDATE SET
                    platform = excluded.platform, push_channel = excluded.push_channel, tags = excluded.tags
            ), stored_records AS (
                INSERT INTO transactions (
                    digital_card_id, record_id, date, instant, status, type, currency_code, amount, display_amount,
                    merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id, is_auxiliary)
                SELECT r.digital_card_id, r.record_id, r.date, r.instant, r.status, r.type, r.currency_code, r.amount,
                    r.display_amount, r.merchant_name, r.merchant_type, r.merchant_postal_code, r.terminal_id,
                    r.merchant_id, r.is_auxiliary
                FROM unnest($7::text[], $8::text[], $9::text[], $10::float8[], $11::text[], $12::text[], $13::text[],
                            $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[],
                            $21::bool[])
                    WITH ORDINALITY AS r(digital_card_id, record_id, date, instant, status, type, currency_code, amount,
                        display_amount, merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id,
                        is_auxiliary, ordinal)
                ORDER BY r.ordinal
                ON CONFLICT (digital_card_id, record_id) DO NOTHING
            )
            SELECT digital_card_id, inserted FROM changed_cards
            """
    }

    /// Forgets up to `limit` processed ids recorded before `cutoff` and their results; returns how many ids.
    /// Rows another replica's sweep holds are skipped, not waited for.
    func expire(recordedBefore cutoff: Date, limit: Int) async throws -> Int {
        let query: PostgresQuery = """
            WITH doomed AS (
                SELECT message_id FROM processed_messages WHERE recorded_at < \(cutoff)
                LIMIT \(limit) FOR UPDATE SKIP LOCKED
            ), deleted AS (
                DELETE FROM processed_messages AS m USING doomed WHERE m.message_id = doomed.message_id
                RETURNING m.message_id
            ), deleted_results AS (
                DELETE FROM processed_results AS r USING deleted WHERE r.message_id = deleted.message_id
            )
            SELECT count(*) FROM deleted
            """
        for try await row in try await connection.query(query, logger: logger) {
            return try row.decode(Int.self)
        }
        return 0
    }

    /// Deletes the notes of messages no longer recorded: expired ones, and those an older build's sweep or a note
    /// racing the sweep left behind. Nothing on a schema whose `undelivered_results` waits for `wallet-worker
    /// migrate` (behind a pending index build): the sweep of the records must not fail for it.
    func forgetOrphanedNotes() async throws {
        var exists = false
        for try await row in try await connection.query(
            "SELECT to_regclass('undelivered_results') IS NOT NULL", logger: logger)
        {
            exists = try row.decode(Bool.self)
        }
        guard exists else { return }
        try await connection.query(
            """
            DELETE FROM undelivered_results AS u
            WHERE NOT EXISTS (SELECT 1 FROM processed_messages AS m WHERE m.message_id = u.message_id)
            """, logger: logger)
    }

    /// Notes messages as undelivered (only those recorded) and forgets the delivered ones, in one statement. As in
    /// the other stores, a message noted both ways is delivered, and of two notes of one message the later is kept
    /// (one statement may not write a row twice).
    func note(_ note: ResultDeliveryNote) async throws {
        let delivered = Set(note.delivered)
        var latest: [String: UndeliveredResults] = [:]
        for undelivered in note.undelivered where !delivered.contains(undelivered.messageID) {
            latest[undelivered.messageID] = undelivered
        }
        let undelivered = Array(latest.values)
        let query: PostgresQuery = """
            WITH forgotten AS (
                DELETE FROM undelivered_results WHERE message_id = ANY(\(note.delivered))
            )
            INSERT INTO undelivered_results (message_id, dead_lettered_at, reason, error)
            SELECT n.message_id, to_timestamp(n.at), n.reason, n.error
            FROM unnest(\(undelivered.map(\.messageID)), \(undelivered.map(\.deadLetteredAt.timeIntervalSince1970)),
                        \(undelivered.map(\.reason)), \(undelivered.map(\.error))) AS n (message_id, at, reason, error)
            WHERE EXISTS (SELECT 1 FROM processed_messages AS m WHERE m.message_id = n.message_id)
            ON CONFLICT (message_id) DO UPDATE SET
                dead_lettered_at = excluded.dead_lettered_at, reason = excluded.reason, error = excluded.error
            """
        try await connection.query(query, logger: logger)
    }

    /// The note of `messageID`'s results as undelivered, if any.
    func undelivered(_ messageID: String) async throws -> UndeliveredResults? {
        let query: PostgresQuery = """
            SELECT extract(epoch FROM dead_lettered_at)::float8, reason, error
            FROM undelivered_results WHERE message_id = \(messageID)
            """
        for try await (at, reason, error) in try await connection.query(query, logger: logger)
            .decode((Double, String, String).self)
        {
            return UndeliveredResults(
                messageID: messageID, deadLetteredAt: Date(timeIntervalSince1970: at), reason: reason, error: error)
        }
        return nil
    }

    // MARK: - Helpers

    /// Runs a batch statement, prepared on this connection's first use of it.
    private func run<Text: BatchStatementText>(_ text: Text.Type, _ bindings: PostgresBindings) async throws
        -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow>
    {
        try await connection.execute(PreparedBatchStatement(text, bindings), logger: logger)
    }

    private static func cardColumns(_ cards: [CardRecord]) -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(PostgresArrayColumn(cards) { $0.digitalCardId })
        bindings.append(PostgresArrayColumn(cards) { $0.state.rawValue })
        bindings.append(PostgresArrayColumn(cards) { $0.tokenizedCardId })
        bindings.append(PostgresArrayColumn(cards) { $0.keyType.rawValue })
        bindings.append(PostgresArrayColumn(cards) { $0.paymentKeys?.numberOfPaymentsLeft })
        bindings.append(PostgresArrayColumn(cards) { $0.paymentKeys?.expiresAt })
        return bindings
    }

    private static func appendRecordColumns(
        _ stored: [(digitalCardId: String, record: TransactionRecord)], to bindings: inout PostgresBindings
    ) {
        bindings.append(PostgresArrayColumn(stored) { $0.digitalCardId })
        bindings.append(PostgresArrayColumn(stored) { $0.record.id })
        bindings.append(PostgresArrayColumn(stored) { $0.record.date })
        bindings.append(PostgresArrayColumn(stored) { $0.record.instant })
        bindings.append(PostgresArrayColumn(stored) { $0.record.status })
        bindings.append(PostgresArrayColumn(stored) { $0.record.type })
        bindings.append(PostgresArrayColumn(stored) { $0.record.currencyCode })
        bindings.append(PostgresArrayColumn(stored) { $0.record.amount.literal })
        bindings.append(PostgresArrayColumn(stored) { $0.record.displayAmount })
        bindings.append(PostgresArrayColumn(stored) { $0.record.merchantName })
        bindings.append(PostgresArrayColumn(stored) { $0.record.merchantType })
        bindings.append(PostgresArrayColumn(stored) { $0.record.merchantPostalCode })
        bindings.append(PostgresArrayColumn(stored) { $0.record.terminalID })
        bindings.append(PostgresArrayColumn(stored) { $0.record.merchantID })
        bindings.append(PostgresArrayColumn(stored) { $0.record.isAuxiliaryTransaction })
    }

    /// The processed ids with the time recorded and their results as one value each (compressed with
    /// `format.compressed`); with `format.rows`, then the results again, one row per result (position: the
    /// publication order).
    private static func appendRecordedColumns(
        _ recorded: [(messageID: String, decision: Decision)], now: Date, format: PostgresResultsFormat,
        to bindings: inout PostgresBindings
    ) {
        bindings.append(PostgresArrayColumn(recorded) { $0.messageID })
        bindings.append(now)
        bindings.append(PostgresArrayColumn(recorded) { $0.decision.outcome.rawValue })
        bindings.append(PostgresArrayColumn(recorded) { $0.decision.sender })
        bindings.append(PostgresArrayColumn(recorded) { $0.decision.digitalCardId })
        let writer = RecordedResultsWriter(compressing: format.compressed)
        bindings.append(
            PostgresArrayColumn(recorded) { RecordedResultsValue(results: $0.decision.results, writer: writer) })
        guard format.rows else { return }
        var results: [(messageID: String, position: Int, result: OutboundResult)] = []
        results.reserveCapacity(recorded.count * 2)
        for entry in recorded {
            for (position, result) in entry.decision.results.enumerated() {
                results.append((entry.messageID, position, result))
            }
        }
        bindings.append(PostgresArrayColumn(results) { $0.messageID })
        bindings.append(PostgresArrayColumn(results) { $0.position })
        bindings.append(PostgresArrayColumn(results) { $0.result.exchange })
        bindings.append(PostgresArrayColumn(results) { $0.result.routingKey })
        bindings.append(PostgresArrayColumn(results) { PostgresBytes(bytes: $0.result.body) })
        bindings.append(PostgresArrayColumn(results) { $0.result.properties.messageID })
        bindings.append(PostgresArrayColumn(results) { $0.result.properties.correlationID })
        bindings.append(PostgresArrayColumn(results) { $0.result.properties.type })
        bindings.append(PostgresArrayColumn(results) { $0.result.properties.traceparent })
    }
}

// MARK: - The statements' names

extension PostgresBatchStatements {
    enum CardsAndProcessedForUpdate: BatchStatementText {
        static let name = "wallet_cards_and_processed_for_update"
        static let sql = cardsAndProcessedLookup(locking: true)
    }

    enum CardsAndProcessedAsCommitted: BatchStatementText {
        static let name = "wallet_cards_and_processed_as_committed"
        static let sql = cardsAndProcessedLookup(locking: false)
    }

    enum RecordedResults: BatchStatementText {
        static let name = "wallet_recorded_results"
        static let sql = recordedResults
    }

    enum RecordsAndHistories: BatchStatementText {
        static let name = "wallet_records_and_histories"
        static let sql = recordsAndNewestTransactions
    }

    enum WriteBatch: BatchStatementText {
        static let name = "wallet_write_batch"
        static let sql = batchWrite(resultRows: false)
    }

    /// The same, the results written as rows too, for builds before schema v5 (until v6).
    enum WriteBatchWithResultRows: BatchStatementText {
        static let name = "wallet_write_batch_with_result_rows"
        static let sql = batchWrite(resultRows: true)
    }

    /// Every statement a batch prepares, for the plan test. Computed: a stored global of metatypes is not
    /// concurrency-safe to the compiler (protocol metatypes are not `Sendable`).
    static var prepared: [any BatchStatementText.Type] {
        [
            CardsAndProcessedForUpdate.self, CardsAndProcessedAsCommitted.self, RecordedResults.self,
            RecordsAndHistories.self, WriteBatch.self, WriteBatchWithResultRows.self,
        ]
    }
}

import Foundation
import Logging
import NIOCore
import PostgresNIO
import WalletRouting

/// The SQL of a batch: a few set-based statements that fetch what the batch reads and write what it changed.
/// Every batch is one `READ COMMITTED` transaction on one connection; rows go in and out as arrays (`unnest`),
/// so a batch of 200 messages costs about a dozen round trips whatever its size.
///
/// Every read by key is a lateral subquery per key, `unnest($1) AS k CROSS JOIN LATERAL (SELECT … WHERE key =
/// k.key FOR UPDATE | OFFSET 0)`: the lock or the `OFFSET 0` keeps the subquery from being flattened into a join, so
/// the planner prices one lookup per key against a scan of the whole table per key, and the index wins on any table
/// past a page or two. Written as `key = ANY($1)` or a join, the reads were planned as whole-table scans (a hashed
/// `= ANY` filter or a hash join) while a table had a few thousand rows, and more often before its first `ANALYZE`:
/// in the profile's run 1,376 scans read 17 million rows (Benchmarks/README.md, "Issue 38").
///
/// Each statement is prepared once per connection under its name (`PreparedBatchStatement`): the names, and the
/// texts of the writes, are at the end of this file; the reads' texts are beside the functions that decode them.
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

    /// Fetches `keys` into `snapshot`, cards first: their row locks are taken in sorted order (two batches lock
    /// their common cards in the same order, so they queue instead of deadlocking), and whatever was stored under
    /// those locks is read by the later statements, each of which sees every commit made before it started.
    /// Without `lock` (a dry run), the cards are read as committed and stay free for the worker.
    func fetch(_ keys: PostgresBatchKeys, into snapshot: inout PostgresBatchSnapshot, lock: Bool = true) async throws {
        if !keys.cards.isEmpty {
            let found = try await cards(keys.cards.sorted(), lock: lock)
            for id in keys.cards { snapshot.cards[id] = .some(found[id]) }
        }
        if !keys.messageIDs.isEmpty {
            let found = try await decisions(keys.messageIDs.sorted(), lock: lock)
            for id in keys.messageIDs { snapshot.decisions[id] = .some(found[id]) }
        }
        if !keys.records.isEmpty {
            let found = try await existingRecords(Array(keys.records))
            for key in keys.records { snapshot.records[key] = found.contains(key) }
        }
        if !keys.histories.isEmpty {
            let requests = keys.histories.map { (key: $0.key, limit: $0.value) }
            let found = try await histories(requests)
            for (index, request) in requests.enumerated() {
                snapshot.histories[request.key] = (request.limit, found[index] ?? [])
            }
        }
    }

    /// The cards that exist among `ids`; with `lock`, row-locked in the order of `ids` until the transaction ends.
    func cards(_ ids: [String], lock: Bool) async throws -> [String: CardRecord] {
        var bindings = PostgresBindings()
        bindings.append(ids)
        var cards: [String: CardRecord] = [:]
        let rows =
            lock
            ? try await run(CardsForUpdate.self, bindings) : try await run(CardsAsCommitted.self, bindings)
        for try await row in rows {
            let (id, state, tokenizedCardId, keyType, paymentsLeft, expiresAt) = try row.decode(
                (String, String, String?, String, Int?, Double?).self)
            cards[id] = CardRecord(
                digitalCardId: id, state: try Self.columns.decode(CardState.self, state, column: "cards.state"),
                tokenizedCardId: tokenizedCardId,
                keyType: try Self.columns.decode(KeyType.self, keyType, column: "cards.key_type"),
                paymentKeys: paymentsLeft.flatMap { left in
                    expiresAt.map { PaymentKeyInfo(numberOfPaymentsLeft: left, expiresAt: $0) }
                })
        }
        return cards
    }

    /// The cards among $1; `locking`, each row-locked as it is found, so in $1's order (a lateral subquery runs once
    /// per row of the `unnest`, in the array's order).
    static func cardLookup(locking: Bool) -> String {
        """
        SELECT c.digital_card_id, c.state, c.tokenized_card_id, c.key_type, c.payments_left, c.keys_expire_at
        FROM unnest($1::text[]) AS k(digital_card_id)
        CROSS JOIN LATERAL (
            SELECT * FROM cards WHERE cards.digital_card_id = k.digital_card_id \(locking ? "FOR UPDATE" : "OFFSET 0")
        ) AS c
        """
    }

    /// The recorded decisions of the processed ids among `ids`; with `lock`, their records are share-locked until the
    /// transaction ends.
    ///
    /// Two statements, the second only when an id was found (a replay: most batches have none). One join of both
    /// tables was planned as a hash join over all of `processed_results` whenever the planner lacked statistics
    /// (a table not analysed yet guesses 200 distinct message ids): a batch with one replay in it read the whole
    /// table (35.9 ms at 89,000 results, growing with the retention). The lock keeps the two consistent: the
    /// retention sweep skips locked records (`expire`), so a record found by the first is not deleted with its
    /// results before the second reads them.
    func decisions(_ ids: [String], lock: Bool) async throws -> [String: Decision] {
        var bindings = PostgresBindings()
        bindings.append(ids)
        let recorded =
            lock
            ? try await run(ProcessedForShare.self, bindings) : try await run(ProcessedAsCommitted.self, bindings)
        var decisions: [String: Decision] = [:]
        for try await row in recorded {
            let (id, outcome, sender, digitalCardId) = try row.decode((String, String, String?, String?).self)
            decisions[id] = try Decision.recorded(
                results: [], outcome: Self.columns.decode(Outcome.self, outcome, column: "processed_messages.outcome"),
                sender: sender, digitalCardId: digitalCardId)
        }
        guard !decisions.isEmpty else { return decisions }
        var found = PostgresBindings()
        found.append(Array(decisions.keys))
        for try await row in try await run(RecordedResults.self, found) {
            let (id, exchange, routingKey, body, resultID, correlationID, type, traceparent) = try row.decode(
                (String, String, String, ByteBuffer, String?, String?, String, String?).self)
            decisions[id]?.results.append(
                OutboundResult(
                    exchange: exchange, routingKey: routingKey, body: Array(body.readableBytesView),
                    properties: OutboundProperties(
                        messageID: resultID, correlationID: correlationID, type: type, traceparent: traceparent)))
        }
        return decisions
    }

    /// The records of the processed ids among $1; `locking`, each share-locked as it is found.
    static func recordLookup(locking: Bool) -> String {
        """
        SELECT m.message_id, m.outcome, m.sender, m.digital_card_id
        FROM unnest($1::text[]) AS k(message_id)
        CROSS JOIN LATERAL (
            SELECT * FROM processed_messages
            WHERE processed_messages.message_id = k.message_id \(locking ? "FOR SHARE" : "OFFSET 0")
        ) AS m
        """
    }

    /// The recorded results of the processed ids $1, by id and position.
    static let recordedResults = """
        SELECT r.message_id, r.exchange, r.routing_key, r.body, r.result_message_id, r.correlation_id, r.type,
            r.traceparent
        FROM unnest($1::text[]) AS k(message_id)
        CROSS JOIN LATERAL (
            SELECT * FROM processed_results WHERE processed_results.message_id = k.message_id OFFSET 0
        ) AS r
        ORDER BY r.message_id, r.position
        """

    /// Which of `keys` are stored records.
    func existingRecords(_ keys: [RecordKey]) async throws -> Set<RecordKey> {
        var bindings = PostgresBindings()
        bindings.append(keys.map(\.digitalCardId))
        bindings.append(keys.map(\.recordId))
        var found = Set<RecordKey>()
        for try await row in try await run(StoredRecords.self, bindings) {
            let (card, record) = try row.decode((String, String).self)
            found.insert(RecordKey(digitalCardId: card, recordId: record))
        }
        return found
    }

    /// The stored records among ($1 cards, $2 record ids).
    static let recordsLookup = """
        SELECT t.digital_card_id, t.record_id
        FROM unnest($1::text[], $2::text[]) AS k(digital_card_id, record_id)
        CROSS JOIN LATERAL (
            SELECT digital_card_id, record_id FROM transactions
            WHERE transactions.digital_card_id = k.digital_card_id AND transactions.record_id = k.record_id
            OFFSET 0
        ) AS t
        """

    /// For each request, the card's newest records (of the kind asked, at most `limit`), newest first, ties: the
    /// later stored first; by request index. One statement: a lateral index range scan per request and kind.
    func histories(_ requests: [(key: HistoryKey, limit: Int)]) async throws -> [Int: [TransactionRecord]] {
        var bindings = PostgresBindings()
        bindings.append(requests.map(\.key.digitalCardId))
        bindings.append(PostgresNullableArray(requests.map(\.key.auxiliary)))
        bindings.append(requests.map(\.limit))
        var histories: [Int: [TransactionRecord]] = [:]
        for try await row in try await run(NewestTransactions.self, bindings) {
            let (
                ordinal, id, date, instant, status, type, currencyCode, amount, displayAmount, merchantName,
                merchantType, merchantPostalCode, terminalID, merchantID, isAuxiliary
            ) = try row.decode(
                (
                    Int, String, String, Double, String, String, String, String, String?, String?, String?, String?,
                    String?, String?, Bool
                ).self)
            histories[ordinal - 1, default: []].append(
                TransactionRecord(
                    id: id, date: date, instant: instant, status: status, type: type, currencyCode: currencyCode,
                    amount: JSONNumber(validatedLiteral: amount), displayAmount: displayAmount,
                    merchantName: merchantName, merchantType: merchantType, merchantPostalCode: merchantPostalCode,
                    terminalID: terminalID, merchantID: merchantID, isAuxiliaryTransaction: isAuxiliary))
        }
        return histories
    }

    /// The history reads of a batch ($1 cards, $2 kinds: true auxiliary, false primary, NULL both; $3 limits).
    /// Each kind is one range of `transactions_newest_first_by_kind`, read only when asked for (a one-time filter
    /// on the request's kind): no record of the other kind is read, and the view of both merges the two ranges.
    static let newestTransactions = """
        SELECT k.ordinal, t.record_id, t.date, t.instant, t.status, t.type, t.currency_code, t.amount,
               t.display_amount, t.merchant_name, t.merchant_type, t.merchant_postal_code, t.terminal_id,
               t.merchant_id, t.is_auxiliary
        FROM unnest($1::text[], $2::bool[], $3::int8[]) WITH ORDINALITY AS k(digital_card_id, auxiliary, row_limit, ordinal)
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
        ORDER BY k.ordinal, t.instant DESC, t.stored_sequence DESC
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

    /// Writes what a routing pass changed: cards, records, installations, then the processed ids with their results.
    /// - Throws: `PostgresConflict` when another transaction created one of the batch's new cards after this one
    ///   found it absent (the batch routed against a stale "absent" and is retried); a unique violation (23505)
    ///   when another transaction recorded one of the batch's message ids first (retried: then it is a replay).
    func write(_ pass: PostgresBatchOverlay, now: Date) async throws {
        let cards = pass.changedCards.keys.sorted().map { pass.changedCards[$0]! }
        if !cards.isEmpty {
            try await store(cards, existing: { pass.existed($0) })
        }
        if !pass.storedRecords.isEmpty {
            try await execute(InsertTransactions.self, Self.recordColumns(pass.storedRecords))
        }
        let installationIDs = pass.installations.keys.sorted()
        let upserted = installationIDs.compactMap { pass.installations[$0]! }
        let deleted = installationIDs.filter { pass.installations[$0]! == nil }
        if !upserted.isEmpty {
            var bindings = PostgresBindings()
            bindings.append(upserted.map(\.installationId))
            bindings.append(upserted.map(\.platform))
            bindings.append(upserted.map(\.pushChannel))
            bindings.append(try upserted.map { try StoredColumns.encodeTags($0.tags) })
            try await execute(UpsertInstallations.self, bindings)
        }
        if !deleted.isEmpty {
            var bindings = PostgresBindings()
            bindings.append(deleted)
            try await execute(DeleteInstallations.self, bindings)
        }
        try await record(pass.recorded.sorted { $0.messageID < $1.messageID }, now: now)
    }

    /// Writes the batch's changed cards (sorted by id) in one statement: those it found, row-locked since, are
    /// updated; the others are inserted. An upsert finds each card through the primary key whatever the planner
    /// knows (an `UPDATE … FROM unnest(…)` was a hash join over the whole table while it had a few thousand rows).
    /// - Throws: `PostgresConflict` when a card the batch found absent exists now: another transaction created it
    ///   after this one looked, so the batch routed against a stale "absent" (the upsert's update of that card is
    ///   rolled back with the batch, which is routed again).
    private func store(_ cards: [CardRecord], existing: (String) -> Bool) async throws {
        for try await row in try await run(UpsertCards.self, Self.cardColumns(cards)) {
            let (id, inserted) = try row.decode((String, Bool).self)
            guard inserted || existing(id) else {
                throw PostgresConflict(description: "a card the batch found absent was created by another transaction")
            }
        }
    }

    /// Inserts or updates the cards of $1…$6; returns each card's id and whether it was inserted (`xmax` is 0 on a
    /// row this statement inserted, this transaction's id on one it updated).
    static let cardUpsert = """
        INSERT INTO cards AS c (digital_card_id, state, tokenized_card_id, key_type, payments_left, keys_expire_at)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::float8[])
        ON CONFLICT (digital_card_id) DO UPDATE SET
            state = excluded.state, tokenized_card_id = excluded.tokenized_card_id, key_type = excluded.key_type,
            payments_left = excluded.payments_left, keys_expire_at = excluded.keys_expire_at
        RETURNING c.digital_card_id, c.xmax = 0
        """

    /// The processed ids (sorted: two batches sharing ids insert them in the same order) and their results.
    private func record(_ recorded: [(messageID: String, decision: Decision)], now: Date) async throws {
        guard !recorded.isEmpty else { return }
        var messages = PostgresBindings()
        messages.append(recorded.map(\.messageID))
        messages.append(now)
        messages.append(recorded.map(\.decision.outcome.rawValue))
        messages.append(PostgresNullableArray(recorded.map(\.decision.sender)))
        messages.append(PostgresNullableArray(recorded.map(\.decision.digitalCardId)))
        try await execute(InsertProcessedMessages.self, messages)

        let results = recorded.flatMap { entry in
            entry.decision.results.enumerated().map {
                (messageID: entry.messageID, position: $0.offset, result: $0.element)
            }
        }
        guard !results.isEmpty else { return }
        var bindings = PostgresBindings()
        bindings.append(results.map(\.messageID))
        bindings.append(results.map(\.position))
        bindings.append(results.map(\.result.exchange))
        bindings.append(results.map(\.result.routingKey))
        bindings.append(results.map { ByteBuffer(bytes: $0.result.body) })
        bindings.append(PostgresNullableArray(results.map(\.result.properties.messageID)))
        bindings.append(PostgresNullableArray(results.map(\.result.properties.correlationID)))
        bindings.append(results.map(\.result.properties.type))
        bindings.append(PostgresNullableArray(results.map(\.result.properties.traceparent)))
        try await execute(InsertProcessedResults.self, bindings)
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

    /// Runs a batch statement that returns no rows.
    private func execute<Text: BatchStatementText>(_ text: Text.Type, _ bindings: PostgresBindings) async throws {
        for try await _ in try await run(text, bindings) {}
    }

    static func cardColumns(_ cards: [CardRecord]) -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(cards.map(\.digitalCardId))
        bindings.append(cards.map(\.state.rawValue))
        bindings.append(PostgresNullableArray(cards.map(\.tokenizedCardId)))
        bindings.append(cards.map(\.keyType.rawValue))
        bindings.append(PostgresNullableArray(cards.map { $0.paymentKeys?.numberOfPaymentsLeft }))
        bindings.append(PostgresNullableArray(cards.map { $0.paymentKeys?.expiresAt }))
        return bindings
    }

    private static func recordColumns(_ stored: [(digitalCardId: String, record: TransactionRecord)])
        -> PostgresBindings
    {
        let records = stored.map(\.record)
        var bindings = PostgresBindings()
        bindings.append(stored.map(\.digitalCardId))
        bindings.append(records.map(\.id))
        bindings.append(records.map(\.date))
        bindings.append(records.map(\.instant))
        bindings.append(records.map(\.status))
        bindings.append(records.map(\.type))
        bindings.append(records.map(\.currencyCode))
        bindings.append(records.map(\.amount.literal))
        bindings.append(PostgresNullableArray(records.map(\.displayAmount)))
        bindings.append(PostgresNullableArray(records.map(\.merchantName)))
        bindings.append(PostgresNullableArray(records.map(\.merchantType)))
        bindings.append(PostgresNullableArray(records.map(\.merchantPostalCode)))
        bindings.append(PostgresNullableArray(records.map(\.terminalID)))
        bindings.append(PostgresNullableArray(records.map(\.merchantID)))
        bindings.append(records.map(\.isAuxiliaryTransaction))
        return bindings
    }
}

// MARK: - The statements' names

extension PostgresBatchStatements {
    enum CardsForUpdate: BatchStatementText {
        static let name = "wallet_cards_for_update"
        static let sql = cardLookup(locking: true)
    }

    enum CardsAsCommitted: BatchStatementText {
        static let name = "wallet_cards_as_committed"
        static let sql = cardLookup(locking: false)
    }

    enum ProcessedForShare: BatchStatementText {
        static let name = "wallet_processed_for_share"
        static let sql = recordLookup(locking: true)
    }

    enum ProcessedAsCommitted: BatchStatementText {
        static let name = "wallet_processed_as_committed"
        static let sql = recordLookup(locking: false)
    }

    enum RecordedResults: BatchStatementText {
        static let name = "wallet_recorded_results"
        static let sql = recordedResults
    }

    enum StoredRecords: BatchStatementText {
        static let name = "wallet_stored_records"
        static let sql = recordsLookup
    }

    enum NewestTransactions: BatchStatementText {
        static let name = "wallet_newest_transactions"
        static let sql = newestTransactions
    }

    enum UpsertCards: BatchStatementText {
        static let name = "wallet_upsert_cards"
        static let sql = cardUpsert
    }

    enum InsertTransactions: BatchStatementText {
        static let name = "wallet_insert_transactions"
        static let sql = """
            INSERT INTO transactions (
                digital_card_id, record_id, date, instant, status, type, currency_code, amount, display_amount,
                merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id, is_auxiliary)
            SELECT r.digital_card_id, r.record_id, r.date, r.instant, r.status, r.type, r.currency_code, r.amount,
                r.display_amount, r.merchant_name, r.merchant_type, r.merchant_postal_code, r.terminal_id,
                r.merchant_id, r.is_auxiliary
            FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[], $5::text[], $6::text[], $7::text[],
                        $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                        $15::bool[])
                WITH ORDINALITY AS r(digital_card_id, record_id, date, instant, status, type, currency_code, amount,
                    display_amount, merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id,
                    is_auxiliary, ordinal)
            ORDER BY r.ordinal  -- stored_sequence follows the batch's order: later stored, later sequence
            ON CONFLICT (digital_card_id, record_id) DO NOTHING
            """
    }

    enum UpsertInstallations: BatchStatementText {
        static let name = "wallet_upsert_installations"
        static let sql = """
            INSERT INTO installations (installation_id, platform, push_channel, tags)
            SELECT u.installation_id, u.platform, u.push_channel, u.tags::jsonb
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(installation_id, platform, push_channel, tags)
            ON CONFLICT (installation_id) DO UPDATE SET
                platform = excluded.platform, push_channel = excluded.push_channel, tags = excluded.tags
            """
    }

    enum DeleteInstallations: BatchStatementText {
        static let name = "wallet_delete_installations"
        static let sql = "DELETE FROM installations WHERE installation_id = ANY($1)"
    }

    enum InsertProcessedMessages: BatchStatementText {
        static let name = "wallet_insert_processed_messages"
        static let sql = """
            INSERT INTO processed_messages (message_id, recorded_at, outcome, sender, digital_card_id)
            SELECT u.message_id, $2, u.outcome, u.sender, u.digital_card_id
            FROM unnest($1::text[], $3::text[], $4::text[], $5::text[]) AS u(message_id, outcome, sender, digital_card_id)
            """
    }

    enum InsertProcessedResults: BatchStatementText {
        static let name = "wallet_insert_processed_results"
        static let sql = """
            INSERT INTO processed_results (
                message_id, position, exchange, routing_key, body, result_message_id, correlation_id, type, traceparent)
            SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
                                 $8::text[], $9::text[])
            """
    }

    /// Every statement a batch prepares, for the plan test.
    static let prepared: [any BatchStatementText.Type] = [
        CardsForUpdate.self, CardsAsCommitted.self, ProcessedForShare.self, ProcessedAsCommitted.self,
        RecordedResults.self, StoredRecords.self, NewestTransactions.self, UpsertCards.self, InsertTransactions.self,
        UpsertInstallations.self, DeleteInstallations.self, InsertProcessedMessages.self, InsertProcessedResults.self,
    ]
}

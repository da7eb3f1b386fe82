import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing
import WalletRouting

@testable import WalletStore

/// What only the durable store has: a file, other connections, a schema version.
@Suite struct SQLiteWalletStoreTests {
    private static func open(_ path: String, busyTimeout: Duration = .seconds(5)) throws -> SQLiteWalletStore {
        var configuration = SQLiteWalletStore.Configuration(path: path)
        configuration.busyTimeout = busyTimeout
        return try SQLiteWalletStore(configuration: configuration)
    }

    /// A real failure at a known point: a trigger (created by another connection) aborts the statement that
    /// records `messageID` as processed, with "injected failure".
    private static func failRecording(messageID: String, in path: String) async throws {
        let other = try otherConnection(path)
        try await other.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER fail_on_\(messageID) BEFORE INSERT ON processed_messages
                    WHEN NEW.message_id = '\(messageID)' BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                    """)
        }
        try other.close()
    }

    /// A second connection to the same file, as another process (or the sqlite3 CLI) would have.
    private static func otherConnection(_ path: String) throws -> DatabaseQueue {
        var configuration = GRDB.Configuration()
        configuration.allowsUnsafeTransactions = true  // to hold a lock across accesses
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    @Test func stateAndReplaysSurviveCloseAndReopen() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let messages = [
                Messages.install("DC-1", id: "m1", keyType: "LUK"),
                Messages.cps("DC-1", code: "CBP.info.tokenSuspended", id: "m2", replyTo: "reply-queue"),
                Messages.ignored(id: "m3"),
            ]
            let store = try Self.open(path)
            let first = try await store.process(
                messages, router: NotificationRouter(), now: Date(timeIntervalSince1970: 1_000))
            await store.close()

            let reopened = try Self.open(path)
            let harness = StoreHarness(store: reopened, path: path)
            #expect(try await harness.card("DC-1")?.state == .suspended)
            #expect(try await harness.card("DC-1")?.keyType == .luk)

            let replay = try await reopened.process(
                messages, router: NotificationRouter(), now: Date(timeIntervalSince1970: 9_000))
            #expect(replay.map(\.isReplay) == [true, true, true])
            for (original, replayed) in zip(first, replay) {
                // Byte for byte: exchange, routing key, body, every property; and the labels.
                #expect(replayed.decision.results == original.decision.results)
                #expect(replayed.decision.results.map(\.body) == original.decision.results.map(\.body))
                #expect(replayed.decision.outcome == original.decision.outcome)
                #expect(replayed.decision.sender == original.decision.sender)
                #expect(replayed.decision.digitalCardId == original.decision.digitalCardId)
                #expect(replayed.decision.disposition == .acknowledge)
                #expect(replayed.decision.effects.isEmpty)
            }
            #expect(replay[1].decision.results.map(\.exchange) == ["wallet.events", "", "wallet.events", ""])
            #expect(replay[1].decision.results.first?.properties.messageID == "m2/0")
            await reopened.close()
        }
    }

    @Test func theFileIsInWALModeAndReadableByAnotherConnection() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try Self.open(path)
            _ = try await store.process([Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())

            let other = try Self.otherConnection(path)
            try await other.read { db in
                #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
                #expect(
                    try String.fetchOne(db, sql: "SELECT state FROM cards WHERE digital_card_id = 'DC-1'") == "active")
                let blob = try Data.fetchOne(db, sql: "SELECT results FROM processed_messages WHERE message_id = 'm1'")
                let recorded = try blob.map { data in
                    try data.withUnsafeBytes { try RecordedResultsEncoding.decode($0) }
                }
                #expect(recorded?.count == 2)
                // newestTransactions reads each kind as one range of the index, in order: no temporary B-tree to
                // sort, and neither kind walks the other's records.
                for auxiliary in [0, 1] {
                    let plan = try Row.fetchAll(
                        db,
                        sql: """
                            EXPLAIN QUERY PLAN SELECT * FROM transactions
                            WHERE digital_card_id = 'DC-1' AND is_auxiliary = \(auxiliary)
                            ORDER BY instant DESC, stored_sequence DESC LIMIT 10
                            """
                    ).map { $0["detail"] as String }
                    #expect(
                        plan.contains {
                            $0.contains("transactions_newest_first_by_kind (digital_card_id=? AND is_auxiliary=?)")
                        }, "\(plan)")
                    #expect(!plan.contains { $0.contains("TEMP B-TREE") })
                }
            }
            try other.close()
            await store.close()
        }
    }

    @Test func aLockedDatabaseFailsTheBatchAsTransientWithinTheBusyTimeout() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try Self.open(path, busyTimeout: .milliseconds(100))
            let other = try Self.otherConnection(path)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN EXCLUSIVE") }

            let clock = ContinuousClock()
            let start = clock.now
            let error = await #expect(throws: StoreError.self) {
                try await store.process([Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            }
            let elapsed = clock.now - start
            #expect(error?.kind == .transient)
            // The whole path: an operator must tell which file of which worker failed.
            #expect(error?.message == "SQLite busy: database is locked (\(path))")
            // It waited for the busy timeout, and not for ever (a loaded runner can stall a test for seconds).
            #expect(elapsed >= .milliseconds(90) && elapsed < .seconds(20))

            try await other.writeWithoutTransaction { try $0.execute(sql: "ROLLBACK") }
            try other.close()
            // Nothing was applied or recorded: the retry routes the message afresh.
            #expect(try await StoreHarness(store: store, path: path).card("DC-1") == nil)
            let retry = try await store.process(
                [Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            #expect(retry.map(\.isReplay) == [false])
            await store.close()
        }
    }

    /// Issue 25: `wallet-worker route --store sqlite:…` (a dry run, one message per line) waited for the worker's
    /// write lock and failed after the busy timeout. It reads a snapshot instead, and still writes nothing.
    @Test func aDryRunOfOneMessageDoesNotWaitForAnotherWritersLock() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try Self.open(path, busyTimeout: .seconds(30))
            _ = try await store.process([Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            let other = try Self.otherConnection(path)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN EXCLUSIVE") }

            let clock = ContinuousClock()
            let start = clock.now
            let replay = try await store.dryRun(
                [Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            let fresh = try await store.dryRun(
                [Messages.tns("DC-1", recordId: "T-1", id: "m2")], router: NotificationRouter(), now: Date())
            // Well under the 30 s busy timeout it would wait for (a bound of 4 s against 5 s was too tight for a
            // loaded runner, which stalls for seconds).
            #expect(clock.now - start < .seconds(15))
            #expect(replay.map(\.isReplay) == [true])
            #expect(fresh.map(\.isReplay) == [false])
            #expect(fresh.first?.decision.effects.isEmpty == false, "the dry run routed against the file's card")

            try await other.writeWithoutTransaction { try $0.execute(sql: "ROLLBACK") }
            try other.close()
            // Nothing of the dry run was written.
            let again = try await store.process(
                [Messages.tns("DC-1", recordId: "T-1", id: "m2")], router: NotificationRouter(), now: Date())
            #expect(again.map(\.isReplay) == [false])
            await store.close()
        }
    }

    @Test func aBatchThatFailsMidwayCommitsNothing() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try Self.open(path)
            // A real failure at a known point: recording the third message aborts its statement.
            try await Self.failRecording(messageID: "boom", in: path)

            let error = await #expect(throws: StoreError.self) {
                try await store.process(
                    [
                        Messages.install("DC-1", id: "m1"), Messages.install("DC-2", id: nil),
                        Messages.tns("DC-1", recordId: "T-1", id: "boom"),
                    ], router: NotificationRouter(), now: Date())
            }
            #expect(error?.kind == .permanent)
            #expect(error?.message.hasPrefix("SQLite constraint violated: injected failure") == true)

            let harness = StoreHarness(store: store, path: path)
            #expect(try await harness.card("DC-1") == nil)
            #expect(try await harness.card("DC-2") == nil)
            #expect(try await harness.transactions("DC-1").isEmpty)
            let again = try await store.process(
                [Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            #expect(again.map(\.isReplay) == [false])
            await store.close()
        }
    }

    /// The cards and histories kept between batches (`SQLiteStateCache`) never hide another writer's commits.
    @Test func anotherWritersCommitsAreSeenByTheNextBatch() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let first = try Self.open(path)
            let second = try Self.open(path)
            let router = NotificationRouter()
            // The first store reads (and keeps) both cards and DC-1's history.
            _ = try await first.process(
                [
                    Messages.install("DC-1", id: "m1"), Messages.install("DC-2", id: "m2"),
                    Messages.tns("DC-1", recordId: "T-1", date: "2026-11-20T10:15:00Z", id: "m3"),
                    Messages.tns("DC-2", recordId: "T-9", id: "m4"),
                ], router: router, now: Self.now)
            // Another connection stores a newer record of DC-1 and deletes DC-2.
            _ = try await second.process(
                [
                    Messages.tns("DC-1", recordId: "T-2", date: "2026-11-20T11:00:00Z", id: "m5"),
                    Messages.cps("DC-2", code: "CBP.info.tokenDeleted", id: "m6"),
                ], router: router, now: Self.now)

            let decisions = try await first.process(
                [
                    Messages.tns("DC-1", recordId: "T-3", date: "2026-11-20T09:00:00Z", id: "m7"),
                    Messages.tns("DC-2", recordId: "T-10", id: "m8"),
                ], router: router, now: Self.now)
            #expect(try Self.recordIDs(inTNSResultOf: decisions[0].decision) == ["T-2", "T-1", "T-3"])
            #expect(decisions[1].decision.results.map(\.routingKey) == ["transactions.error"], "DC-2 was deleted")
            await first.close()
            await second.close()
        }
    }

    /// A batch that rolls back takes back what it taught the cache: the next batch sees the file as it is.
    @Test func aRolledBackBatchLeavesNoTraceInTheNextBatchsReads() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try Self.open(path)
            try await Self.failRecording(messageID: "boom", in: path)
            let router = NotificationRouter()
            _ = try await store.process(
                [
                    Messages.install("DC-1", id: "m1"),
                    Messages.tns("DC-1", recordId: "T-1", date: "2026-11-20T10:15:00Z", id: "m2"),
                ], router: router, now: Self.now)
            // Stores T-2 and suspends the card, then fails on its last message: all rolled back.
            await #expect(throws: StoreError.self) {
                try await store.process(
                    [
                        Messages.tns("DC-1", recordId: "T-2", date: "2026-11-20T11:00:00Z", id: "m3"),
                        Messages.suspend("DC-1", id: "m4"), Messages.ignored(id: "boom"),
                    ], router: router, now: Self.now)
            }
            let decisions = try await store.process(
                [
                    // Same instant as T-1, stored later: before it.
                    Messages.tns("DC-1", recordId: "T-3", date: "2026-11-20T10:15:00Z", id: "m5"),
                    Messages.suspend("DC-1", id: "m6"),
                ], router: router, now: Self.now)
            #expect(try Self.recordIDs(inTNSResultOf: decisions[0].decision) == ["T-3", "T-1"])
            let suspension = try #require(decisions[1].decision.results.first { $0.exchange == "wallet.events" })
            let event = try #require(try JSONSerialization.jsonObject(with: Data(suspension.body)) as? [String: Any])
            #expect(event["previousState"] as? String == "active", "the rolled-back suspension is forgotten")
            #expect(event["state"] as? String == "suspended")
            await store.close()
        }
    }

    /// Many batches of mixed card traffic (ties between instants, auxiliary records, filtered histories, repeated
    /// record ids, suspensions and deletions): SQLite, reading through its cache, decides exactly as the in-memory
    /// store, including after another connection wrote to the file between two batches.
    @Test func decisionsThroughTheCacheMatchTheInMemoryStore() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let sqlite = try Self.open(path)
            let memory = InMemoryWalletStore()
            let router = NotificationRouter()
            var random = SplitMix64(seed: 0x5EED_CAC4E)
            var sequence = 0
            func nextMessage() -> InboundMessage {
                sequence += 1
                let id = "msg-\(sequence)"
                let card = "DC-\(random.next(below: 12))"
                switch random.next(below: 20) {
                case 0: return Messages.install(card, id: id)
                case 1: return Messages.suspend(card, id: id)
                case 2: return Messages.resume(card, id: id)
                case 3 where random.next(below: 4) == 0:
                    return Messages.cps(card, code: "CBP.info.tokenDeleted", id: id)
                case 4: return Messages.mg(card, id: id)
                default:
                    // Few distinct dates and record ids: ties between instants and repeated ids are common.
                    let hour = String(format: "%02d", 8 + random.next(below: 4))
                    let minute = ["00", "30"][random.next(below: 2)]
                    let recordType = [
                        "", #","transactionRecordType":"primary""#, #","transactionRecordType":"auxiliary""#,
                    ][
                        random.next(below: 3)]
                    let auxiliary = random.next(below: 3) == 0
                    return Messages.message(
                        #"""
                        {"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)"\#(recordType),
                         "transaction":{"id":"T-\#(random.next(below: 400))","date":"2026-11-20T\#(hour):\#(minute):00Z",
                                        "status":"approved","type":"purchase","currencyCode":"EUR","amount":1.5,
                                        "isAuxiliaryTransaction":\#(auxiliary)}}
                        """#, id: id)
                }
            }
            func processBoth(_ batch: [InboundMessage]) async throws {
                let expected = try await memory.process(batch, router: router, now: Self.now)
                let actual = try await sqlite.process(batch, router: router, now: Self.now)
                #expect(actual == expected, "batch ending with \(batch.last?.properties.messageID ?? "")")
            }
            // The cards exist before the traffic.
            try await processBoth((0..<12).map { Messages.install("DC-\($0)", id: "install-\($0)") })
            for round in 0..<60 {
                try await processBoth((0..<(1 + random.next(below: 40))).map { _ in nextMessage() })
                if round == 30 {
                    // Another connection (a second store on the file) processes a batch; the in-memory store
                    // gets the same batch, so both still hold the same state.
                    let batch = (0..<20).map { _ in nextMessage() }
                    let other = try Self.open(path)
                    _ = try await other.process(batch, router: router, now: Self.now)
                    await other.close()
                    _ = try await memory.process(batch, router: router, now: Self.now)
                }
            }
            await sqlite.close()
        }
    }

    /// 2026-11-20T12:00:00Z, after every record the cache tests store.
    private static let now = Date(timeIntervalSince1970: 1_795_176_000)

    /// The ids of the records in a TNS result, in the order published (newest first).
    private static func recordIDs(inTNSResultOf decision: Decision) throws -> [String] {
        let result = try #require(decision.results.first { $0.routingKey == "transactions.records" })
        let body = try #require(try JSONSerialization.jsonObject(with: Data(result.body)) as? [String: Any])
        let records = try #require(body["records"] as? [[String: Any]])
        return records.compactMap { $0["id"] as? String }
    }

    /// A file written by a build with schema v1 (one row per result) replays the same results after v2.
    @Test func recordsOfASchemaV1FileReplayUnchangedAfterTheMigration() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let v1 = try DatabaseQueue(path: path)
            try SQLiteSchema.migrator.migrate(v1, upTo: "v1")
            // What v1's record wrote for a message with two results (one a reply_to copy) and an ignored one.
            try await v1.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO processed_messages VALUES ('m1', 100.5, 'processed', 'CPS', 'DC-1');
                        INSERT INTO processed_messages VALUES ('m2', 101.0, 'ignored', NULL, NULL);
                        INSERT INTO processed_results VALUES
                            ('m1', 0, 'wallet.events', 'card.installed', X'7B7D', 'm1/0', 'c-1', 'cardEvent', 'tp-1'),
                            ('m1', 1, '', 'reply-queue', X'7B7D', 'm1/0', 'c-1', 'cardEvent', NULL);
                        """)
            }
            try v1.close()

            let store = try Self.open(path)
            let replays = try await store.process(
                [Messages.ignored(id: "m2"), Messages.message(#"{}"#, id: "m1", replyTo: "reply-queue")],
                router: NotificationRouter(), now: Date())
            #expect(replays.map(\.isReplay) == [true, true])
            #expect(replays[0].decision.results.isEmpty)
            #expect(replays[0].decision.outcome == .ignored)
            let m1 = replays[1].decision
            #expect(m1.outcome == .processed && m1.sender == "CPS" && m1.digitalCardId == "DC-1")
            #expect(
                m1.results == [
                    OutboundResult(
                        exchange: "wallet.events", routingKey: "card.installed", body: Array("{}".utf8),
                        properties: OutboundProperties(
                            messageID: "m1/0", correlationID: "c-1", type: "cardEvent", traceparent: "tp-1")),
                    OutboundResult(
                        exchange: "", routingKey: "reply-queue", body: Array("{}".utf8),
                        properties: OutboundProperties(
                            messageID: "m1/0", correlationID: "c-1", type: "cardEvent", traceparent: "tp-1")),
                ])
            // The reply_to copy is made for the delivery replayed (an identical copy of its primary), not read back.
            let withoutReplyTo = try await store.process(
                [Messages.ignored(id: "m1")], router: NotificationRouter(), now: Date())
            #expect(withoutReplyTo[0].decision.results == [m1.results[0]])
            // The retention sweep still finds v1's records by their time.
            #expect(try await store.expireProcessedMessages(recordedBefore: Date(timeIntervalSince1970: 101)) == 1)
            await store.close()
        }
    }

    /// Processes sharing a new file start at the same moment: none fails permanently on the schema race.
    @Test(.cpuBound) func storesOpeningANewFileAtOnceAllSucceed() async throws {
        try await withTemporaryDirectory { directory in
            for round in 0..<100 {
                let path = directory.appendingPathComponent("wallet-\(round).sqlite").path
                let failures = Mutex<[String]>([])
                DispatchQueue.concurrentPerform(iterations: 3) { _ in
                    do {
                        _ = try Self.open(path)
                    } catch let error as StoreError where error.kind == .transient {
                        // SQLITE_BUSY while another opener sets the file up is transient: not the race tested here.
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
                #expect(failures.withLock { $0 } == [], "round \(round)")
            }
        }
    }

    /// What no other process did is this build's own failure: refused at once, not retried until the busy timeout
    /// as a lost race to create the schema is (the retry ends only at that deadline, so ending before it is the
    /// event this test checks).
    @Test func aMigrationFailingOnASchemaNoOneChangedFailsAtOnce() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            // A table of the first migration's, made by hand, with no migration recorded.
            try DatabaseQueue(path: path).write { try $0.execute(sql: "CREATE TABLE cards (id TEXT)") }
            let busyTimeout = Duration.seconds(20)
            let started = ContinuousClock.now
            let error = try #require(throws: StoreError.self) { try Self.open(path, busyTimeout: busyTimeout) }
            #expect(ContinuousClock.now - started < busyTimeout, "retried as if another process were migrating")
            #expect(error.kind == .permanent)
            #expect("\(error)".contains("already exists"), "\(error)")
        }
    }

    @Test func aSchemaFromANewerBuildIsRefusedAtOpen() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            await (try Self.open(path)).close()
            let other = try Self.otherConnection(path)
            try await other.write {
                try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-future')")
            }
            try other.close()

            let error = #expect(throws: StoreError.self) { try Self.open(path) }
            #expect(error?.kind == .permanent)
            #expect(error?.message.contains("newer than this build") == true)
            #expect(error?.message.contains("v99-future") == true)
        }
    }

    @Test func aFileThatIsNotADatabaseIsRefusedAtOpen() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: StoreError.self) { try Self.open(path) }
            #expect(error?.kind == .permanent)
            #expect(error?.message.hasPrefix("SQLite not a database") == true)
        }
    }

    @Test func callsAfterCloseFail() async throws {
        try await withTemporaryDirectory { directory in
            let store = try WalletStores.open(.sqlite(path: directory.appendingPathComponent("wallet.sqlite").path))
            await store.close()
            await store.close()  // idempotent
            let error = await #expect(throws: StoreError.self) {
                try await store.process([Messages.ignored(id: "m1")], router: NotificationRouter(), now: Date())
            }
            #expect(error?.kind == .permanent)
            await #expect(throws: StoreError.self) { try await store.expireProcessedMessages(recordedBefore: Date()) }
        }
    }

    @Test func storeLocationsOpenTheirStore() async throws {
        #expect(try WalletStores.open(.memory) is InMemoryWalletStore)
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("new.sqlite").path
            let store = try WalletStores.open(try StoreLocation(parsing: "sqlite:\(path)"))
            #expect(store is SQLiteWalletStore)
            #expect(FileManager.default.fileExists(atPath: path))
            await store.close()
        }
    }
}

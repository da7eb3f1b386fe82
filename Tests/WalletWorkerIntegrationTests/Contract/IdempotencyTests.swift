// CONTRACT.md §10 through the broker: effects once per message_id, recorded results republished verbatim,
// no deduplication without a message_id, rejected messages not recorded.
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletRouting
import WalletWorker

private enum Bodies {
    static func cps(_ card: String, _ code: String) -> String {
        #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessage":{"code":"\#(code)","text":"t","severity":"info","params":[]}}"#
    }
    static func install(_ card: String) -> String { cps(card, "CBP.info.tokenProvisioned") }
    static func suspend(_ card: String) -> String { cps(card, "CBP.info.tokenSuspended") }
    static func resume(_ card: String) -> String { cps(card, "CBP.info.tokenResumed") }
    static func delete(_ card: String) -> String { cps(card, "CBP.info.tokenDeleted") }
    static func tns(_ card: String, record id: String, date: String) -> String {
        #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)","transaction":{"id":"\#(id)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":12.5}}"#
    }
}

extension CapturedMessage {
    var json: JSONObject? { (try? JSONParser.parse(body))?.objectValue }
    func string(_ key: String) -> String? { json?[key]?.stringValue }
    func isNull(_ key: String) -> Bool { json?[key]?.isNull ?? false }
    /// The ids of a `transactionRecords` result's `records`.
    var recordIDs: [String]? { json?["records"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } }
}

/// Publishes a sentinel action and waits for its result: afterwards no earlier message can still publish
/// (one consumer processes in queue order). Returns the results that arrived before the sentinel's.
func resultsBeforeSentinel(_ environment: WorkerEnvironment, _ capture: ResultCapture) async throws -> [CapturedMessage]
{
    let id = "\(environment.prefix).sentinel.\(UInt32.random(in: 0...UInt32.max))"
    try await environment.publish(InboundSpec(json: #"{"action":"sentinel"}"#, messageID: id))
    var before: [CapturedMessage] = []
    try await waitUntil("the sentinel's result", every: .milliseconds(5)) {
        let messages = capture.results.messages
        guard let index = messages.firstIndex(where: { $0.properties.messageID == "\(id)/0" }) else { return false }
        before = Array(messages[..<index])
        return true
    }
    return before
}

/// The store a test's worker uses: deduplication must hold in memory and in SQLite (results recorded and replayed
/// from the database must be the same bytes).
enum IdempotencyStore: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, sqlite
    var testDescription: String { rawValue }

    /// Runs `body` with an environment whose worker uses this store (a fresh temporary file for SQLite).
    func withEnvironment(_ purpose: String, _ body: (WorkerEnvironment) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-idem-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("wallet.sqlite").path
        try await withWorkerEnvironment(
            "\(purpose)-\(rawValue)",
            configure: {
                $0.store = self == .memory ? .memory : .sqlite(path: path)
            }
        ) { environment in
            try await body(environment)
            if self == .sqlite {
                #expect(FileManager.default.fileExists(atPath: path), "the SQLite store file \(path) was never created")
            }
        }
    }
}

@Suite("Idempotency through the broker (CONTRACT.md §10)", .timeLimit(.minutes(3)))
struct IdempotencyTests {
    @Test(
        "same message_id in separate batches: applied once, recorded results republished byte for byte",
        arguments: IdempotencyStore.allCases)
    func separateBatches(store: IdempotencyStore) async throws {
        try await store.withEnvironment("idem-separate") { environment in
            _ = try await environment.startWorker()
            let capture = try await environment.resultCapture()
            try await environment.publish(InboundSpec(json: Bodies.install("DC-1"), messageID: "install-1"))
            try await capture.results.waitFor(2, "install")

            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-1", record: "T-1", date: "2026-11-20T10:00:00Z"), messageID: "tns-1"))
            let first = try await capture.results.waitFor(3, "first TNS")[2]
            // Redelivered with the same id, whatever its body: the recorded result again, nothing applied.
            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-1", record: "T-NOT-STORED", date: "2026-11-20T11:00:00Z"), messageID: "tns-1"))
            let replay = try await capture.results.waitFor(4, "TNS replay")[3]
            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-1", record: "T-2", date: "2026-11-20T12:00:00Z"), messageID: "tns-2"))
            let later = try await capture.results.waitFor(5, "second TNS")[4]

            #expect(first.properties.messageID == "tns-1/0")
            #expect(first.recordIDs == ["T-1"], "first TNS result: \(first.text)")
            #expect(
                replay.body == first.body,
                "the replay must repeat the recorded bytes (processedAt included):\n  first:  \(first.text)\n  replay: \(replay.text)"
            )
            #expect(
                replay.properties == first.properties, "replay properties \(replay.properties) vs \(first.properties)")
            #expect(replay.routingKey == first.routingKey && replay.exchange == first.exchange)
            #expect(
                later.recordIDs == ["T-2", "T-1"],
                "T-1 stored once and the replayed body's T-NOT-STORED never stored; got \(later.text)")
            let extra = try await resultsBeforeSentinel(environment, capture)
            #expect(extra.count == 5, "unexpected results: \(extra.dropFirst(5).map(\.summary))")
        }
    }

    @Test(
        "same message_id back to back (one batch): the second is a replay of the first",
        arguments: IdempotencyStore.allCases)
    func backToBack(store: IdempotencyStore) async throws {
        try await store.withEnvironment("idem-back-to-back") { environment in
            try await environment.declareTopology()
            let capture = try await environment.resultCapture()
            // All three are in the work queue before the worker starts, so they arrive in one batch (one store
            // transaction). The duplicate has a delete body: if it were applied, the card would be deleted.
            try await environment.publish([
                InboundSpec(json: Bodies.install("DC-7"), messageID: "install-7"),
                InboundSpec(json: Bodies.suspend("DC-7"), messageID: "suspend-7"),
                InboundSpec(json: Bodies.delete("DC-7"), messageID: "suspend-7"),
            ])
            _ = try await environment.startWorker()
            let results = try await capture.results.waitFor(6, "install, then suspend twice")
            let (event, completed) = (results[2], results[3])
            #expect(
                event.string("event") == "serverMessage" && event.string("previousState") == "active"
                    && event.string("state") == "suspended", "first suspend: \(event.text)")
            #expect(completed.string("event") == "completed" && completed.string("state") == "suspended")
            #expect(
                results[2].properties.messageID == "suspend-7/0" && results[3].properties.messageID == "suspend-7/1")
            for offset in 0..<2 {
                let original = results[2 + offset]
                let replay = results[4 + offset]
                #expect(
                    replay.body == original.body,
                    "replay \(offset) differs:\n  first:  \(original.text)\n  replay: \(replay.text)")
                #expect(replay.properties == original.properties)
                #expect(replay.routingKey == original.routingKey)
            }
            try await environment.publish(InboundSpec(json: Bodies.resume("DC-7"), messageID: "resume-7"))
            let resumed = try await capture.results.waitFor(8, "resume")[6]
            #expect(
                resumed.string("previousState") == "suspended" && resumed.string("state") == "active",
                "the card must still be suspended, not deleted: \(resumed.text)")
            let all = try await resultsBeforeSentinel(environment, capture)
            #expect(all.count == 8, "unexpected results: \(all.dropFirst(8).map(\.summary))")
        }
    }

    @Test(
        "without message_id a message is processed every time, and its results carry no message_id",
        arguments: IdempotencyStore.allCases)
    func noMessageID(store: IdempotencyStore) async throws {
        try await store.withEnvironment("idem-no-id") { environment in
            _ = try await environment.startWorker()
            let capture = try await environment.resultCapture()
            try await environment.publish(InboundSpec(json: Bodies.install("DC-3")))
            try await capture.results.waitFor(2, "first install")
            try await environment.publish(InboundSpec(json: Bodies.install("DC-3")))
            let results = try await capture.results.waitFor(4, "second install")
            #expect(
                results[0].isNull("previousState") && results[0].json?["changed"]?.boolValue == true,
                "first install: \(results[0].text)")
            #expect(
                results[2].string("previousState") == "active" && results[2].json?["changed"]?.boolValue == false,
                "the second install is evaluated against the installed card: \(results[2].text)")
            for result in results {
                #expect(
                    result.properties.messageID == nil,
                    "no inbound message_id, yet result id \(result.properties.messageID ?? "")")
                #expect(result.isNull("messageId"))
            }
            let all = try await resultsBeforeSentinel(environment, capture)
            #expect(all.count == 4)
        }
    }

    @Test(
        "a rejected message's id is not recorded: republished, it is evaluated afresh",
        arguments: IdempotencyStore.allCases)
    func rejectedNotRecorded(store: IdempotencyStore) async throws {
        try await store.withEnvironment("idem-rejected") { environment in
            _ = try await environment.startWorker()
            let capture = try await environment.resultCapture()
            let dead = try await environment.deadLetterReader()
            let bad = InboundSpec(json: #"{"sender":"#, messageID: "bad-1")
            try await environment.publish(bad)
            try await capture.results.waitFor(1, "first rejection")
            try await dead.waitFor(1, "first dead letter")
            try await environment.publish(bad)
            let results = try await capture.results.waitFor(2, "second rejection")
            try await dead.waitFor(2, "second dead letter: a replay would be acknowledged, not dead-lettered")
            #expect(results.allSatisfy { $0.properties.type == "rejected" && $0.properties.messageID == "bad-1/0" })
            // Fixed and replayed under the same id: processed normally.
            try await environment.publish(InboundSpec(json: #"{"action":"fixed"}"#, messageID: "bad-1"))
            let fixed = try await capture.results.waitFor(3, "fixed message")[2]
            #expect(
                fixed.properties.type == "actionTriggered"
                    && fixed.exchange == environment.topology.resultExchanges.actions,
                "the fixed message must be routed afresh: \(fixed.summary)")
            #expect(fixed.properties.messageID == "bad-1/0")
            let all = try await resultsBeforeSentinel(environment, capture)
            #expect(all.count == 3)
            #expect(dead.count == 2, "dead letters: \(dead.messages.map(\.summary))")
        }
    }

    @Test(
        "an ignored message's id is recorded: the same id later publishes nothing", arguments: IdempotencyStore.allCases
    )
    func ignoredRecorded(store: IdempotencyStore) async throws {
        try await store.withEnvironment("idem-ignored") { environment in
            _ = try await environment.startWorker()
            let capture = try await environment.resultCapture()
            try await environment.publish(InboundSpec(json: #"{"aps":{"alert":"hi"}}"#, messageID: "ign-1"))
            try await environment.publish(InboundSpec(json: #"{"action":"now-an-action"}"#, messageID: "ign-1"))
            let before = try await resultsBeforeSentinel(environment, capture)
            #expect(before.isEmpty, "the second message replays the ignored one (nothing): \(before.map(\.summary))")
        }
    }

    @Test("SQLite: a message_id recorded before a worker restart is replayed byte for byte by the next worker")
    func replayAfterRestart() async throws {
        try await IdempotencyStore.sqlite.withEnvironment("idem-restart") { environment in
            let capture = try await environment.resultCapture()
            let first = try await environment.startWorker()
            try await environment.publish(InboundSpec(json: Bodies.install("DC-9"), messageID: "install-9"))
            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-9", record: "T-9", date: "2026-11-20T10:00:00Z"), messageID: "tns-9"))
            let before = try await capture.results.waitFor(3, "install and TNS")
            try await first.stop()
            _ = try await environment.startWorker()
            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-9", record: "T-9-AGAIN", date: "2026-11-20T11:00:00Z"), messageID: "tns-9"))
            try await environment.publish(
                InboundSpec(
                    json: Bodies.tns("DC-9", record: "T-10", date: "2026-11-20T12:00:00Z"), messageID: "tns-10"))
            let after = try await capture.results.waitFor(5, "replay and a new TNS after the restart")
            #expect(
                after[3].body == before[2].body,
                "replay after restart differs:\n  first:  \(before[2].text)\n  replay: \(after[3].text)")
            #expect(after[3].properties == before[2].properties)
            #expect(after[4].recordIDs == ["T-10", "T-9"], "state kept across the restart, T-9 once: \(after[4].text)")
        }
    }
}

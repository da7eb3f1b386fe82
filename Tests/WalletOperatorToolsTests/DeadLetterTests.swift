import AMQPTransport
import Foundation
import Testing

@testable import WalletOperatorTools

/// `wallet-worker dead-letters`: what an operator is told about a dead letter, which ones a filter selects, what a
/// replay publishes, and what a run decides for each message (`DeadLetterPass`), without a broker.
@Suite struct DeadLetterTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let deadLetterQueue = "wallet.notifications.dead"

    func message(
        body: String = #"{"sender":"TNS","digitalCardId":"DC-1"}"#, headers: AMQPTable?, timestamp: UInt64? = nil,
        messageID: String? = "m-1", userID: String? = nil
    ) -> DeadLetterMessage {
        DeadLetterMessage(
            body: Array(body.utf8),
            properties: AMQPMessageProperties(
                contentType: "application/json", headers: headers, deliveryMode: .persistent, messageID: messageID,
                timestamp: timestamp, type: "push", userID: userID),
            routingKey: "backend.tns")
    }

    func letter(_ message: DeadLetterMessage) -> DeadLetter {
        DeadLetter(message, deadLetterQueue: Self.deadLetterQueue)
    }

    func replay(_ message: DeadLetterMessage, to exchange: String, force: Bool = false) throws -> AMQPOutboundMessage {
        try DeadLetterReplay.message(
            for: message, inboundExchange: exchange, ownQueues: ["wallet.notifications.work"], force: force
        ).get()
    }

    static func death(_ reason: String, queue: String, count: Int64 = 1, time: Int64 = 1_800_000_000 - 600)
        -> AMQPFieldValue
    {
        .table([
            "count": .int64(count), "reason": .string(reason), "queue": .string(queue),
            "time": .timestamp(UInt64(time)), "exchange": .string("wallet.notifications"),
        ])
    }

    @Test func aWorkerDeadLetterSaysWhyWithItsSenderAndAge() {
        let letter = self.letter(
            message(
                headers: ["x-worker-error": .string("transient failure, gave up after 5 attempts: store unavailable")],
                timestamp: 1_800_000_000 - 90))
        #expect(letter.deadLetteredBy == "worker")
        #expect(letter.reason.hasPrefix("transient failure"))
        #expect(letter.hint == nil)
        #expect(letter.sender == "TNS")
        #expect(letter.messageID == "m-1")
        #expect(letter.age(at: now) == 90)
    }

    /// `list --json`'s line: every field that is there, with JSON's escapes, keys in alphabetical order; a field
    /// with no value is left out rather than null.
    @Test func aListLineHasEveryFieldInKeyOrderAndEscapesWhatItMust() throws {
        let letters = [
            letter(
                message(
                    headers: [
                        "x-worker-error": .string(
                            "body is not JSON: \"quote\", back\\slash, tab\t, newline\n, \u{1}, é, /"),
                        "x-worker-omitted-body-bytes": .int64(300_000),
                        "x-worker-dropped-headers": .string("digitalCardId (90000 bytes)"),
                    ],
                    timestamp: 1_800_000_000 - 90)),
            letter(
                message(
                    body: "not json", headers: ["x-death": .array([Self.death("rejected", queue: "wallet.in")])],
                    messageID: nil)),
        ]
        for letter in letters {
            let line = letter.jsonLine(at: now)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
            #expect(object["reason"] as? String == letter.reason)
            #expect(object["deadLetteredBy"] as? String == letter.deadLetteredBy)
            #expect(object["routingKey"] as? String == letter.routingKey)
            #expect(object["bodyBytes"] as? Int == letter.bodyBytes)
            #expect(object["messageId"] as? String == letter.messageID)
            #expect(object["sender"] as? String == letter.sender)
            #expect(object["hint"] as? String == letter.hint)
            #expect((object["missing"] as? [String] ?? []) == letter.missing)
            #expect(object["since"] as? String == letter.since?.formatted(.iso8601))
            #expect(object["ageSeconds"] as? Int == letter.age(at: now).map { Int($0) })
            #expect(object.values.allSatisfy { !($0 is NSNull) }, "\(line)")
            // The same line as JSONSerialization writes it with sorted keys: the order `jq -S` and scripts saw.
            let sorted = try JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            #expect(line == String(decoding: sorted, as: UTF8.self))
        }
    }

    @Test func aBrokerDeadLetterNamesTheBrokersReasonAndQueueAndItsTime() {
        let letter = self.letter(
            message(
                body: "\u{FF}",
                headers: ["x-death": .array([Self.death("rejected", queue: "wallet.notifications.work")])]))
        #expect(letter.deadLetteredBy == "broker")
        #expect(letter.reason == "rejected by the broker in wallet.notifications.work")
        #expect(letter.hint?.contains("twice --max-body-bytes") == true)
        #expect(letter.sender == nil, "a body that is not JSON has no sender")
        #expect(letter.age(at: now) == 600)
    }

    /// The tool's own looks (the queue's loop puts an `x-death` entry for the dead-letter queue itself first):
    /// they are not why the message is there.
    @Test func theToolsOwnLooksAreNotTheReason() {
        let letter = self.letter(
            message(headers: [
                "x-death": .array([
                    Self.death("rejected", queue: Self.deadLetterQueue, count: 7, time: 1_800_000_000 - 5),
                    Self.death("delivery_limit", queue: "wallet.notifications.work"),
                ])
            ]))
        #expect(letter.reason == "delivery_limit by the broker in wallet.notifications.work")
        #expect(letter.age(at: now) == 600)
    }

    /// Issue 24, item 7: the hint appended to every broker reason made `--reason body`, `limit`, `worker` or `read`
    /// match every broker rejection (on main these filters select the delivery-limit dead letter below).
    @Test(arguments: ["body", "limit", "worker", "read", "max-body-bytes"])
    func aReasonFilterMatchesTheRecordedReasonNotTheHint(word: String) {
        let rejected = self.letter(
            message(
                headers: ["x-death": .array([Self.death("rejected", queue: "wallet.notifications.work")])]))
        var filter = DeadLetterFilter()
        filter.reason = word
        #expect(!filter.matches(rejected, at: now), "--reason \(word) matched the hint")
        filter.reason = "rejected by the broker"
        #expect(filter.matches(rejected, at: now))
    }

    @Test func filtersAllApply() {
        let letter = self.letter(
            message(
                headers: ["x-worker-error": .string("transient failure: Store Unavailable")],
                timestamp: 1_800_000_000 - 3_600))
        var filter = DeadLetterFilter()
        #expect(filter.isEmpty && filter.matches(letter, at: now))
        filter.reason = "store unavailable"
        #expect(filter.matches(letter, at: now), "the reason is matched case-insensitively")
        filter.sender = "TNS"
        filter.olderThan = .seconds(1_800)
        filter.newerThan = .seconds(7_200)
        #expect(filter.matches(letter, at: now))
        filter.sender = "tns"
        #expect(filter.matches(letter, at: now), "the sender is matched case-insensitively")
        filter.sender = "CPS"
        #expect(!filter.matches(letter, at: now))
        filter.sender = nil
        filter.olderThan = .seconds(7_200)
        #expect(!filter.matches(letter, at: now))

        var byAge = DeadLetterFilter()
        byAge.newerThan = .seconds(10_000)
        #expect(!byAge.matches(self.letter(message(headers: nil)), at: now), "no time: no age condition holds")
    }

    @Test func aReplayIsTheOriginalWithoutWhatWasAddedOnTheWay() throws {
        let original = message(headers: [
            "traceparent": .string("00-abc-def-01"), "x-tenant": .string("eu"),
            "x-retry-count": .int32(4), "x-worker-error": .string("gave up"), "x-worker-last-error": .string("busy"),
            "x-death": .array([]), "x-first-death-queue": .string("q"), "x-last-death-reason": .string("expired"),
            "x-original-x-death": .string("forged"), "x-original-expiration": .string("60000"),
            "x-original-user-id": .string("backend"),
        ])
        let replay = try self.replay(original, to: "wallet.notifications")
        #expect(replay.exchange == "wallet.notifications")
        #expect(replay.routingKey == "backend.tns")
        #expect(replay.mandatory, "an unroutable replay comes back and its dead letter stays")
        #expect(replay.body == original.body)
        #expect(replay.properties.messageID == "m-1" && replay.properties.type == "push")
        #expect(replay.properties.headers?.entries.map(\.key) == ["traceparent", "x-tenant", "x-original-user-id"])

        let bare = try self.replay(message(headers: ["x-worker-error": .string("x")]), to: "in")
        #expect(bare.properties.headers == nil)
    }

    /// Issue 24, item 5: a broker-made dead letter keeps the backend's `user_id`; republished as it is, RabbitMQ
    /// closes the channel (406) and every rerun repeats the batch. It moves aside as on the worker's copies (on
    /// main the replay keeps `user_id`).
    @Test func aReplayMovesAForeignUserIdAside() throws {
        let original = message(
            headers: ["x-death": .array([Self.death("rejected", queue: "wallet.notifications.work")])],
            userID: "wallet-backend")
        let replay = try self.replay(original, to: "wallet.notifications")
        #expect(replay.properties.userID == nil)
        #expect(replay.properties.headers?["x-original-user-id"] == .string("wallet-backend"))
    }

    /// Issue 24, item 6: stripping every `x-worker-*` header replayed truncated dead letters as if whole (on main
    /// these replays are built without complaint).
    @Test func aTruncatedDeadLetterIsNotReplayedUnlessForcedNamingWhatIsMissing() throws {
        let withoutBody = message(
            body: "",
            headers: [
                "x-worker-error": .string("body is 300000 bytes, over the limit"),
                "x-worker-omitted-body-bytes": .int64(300_000),
            ])
        guard
            case .failure(let refusal) = DeadLetterReplay.message(
                for: withoutBody, inboundExchange: "in", ownQueues: [])
        else {
            Issue.record("a dead letter without its body was replayed")
            return
        }
        #expect(refusal.description.contains("300000 bytes") && refusal.description.contains("--force"))
        let withoutHeaders = message(headers: [
            "x-worker-error": .string("rejected"),
            "x-worker-dropped-headers": .string("digitalCardId (90000 bytes), traceparent (40000 bytes)"),
        ])
        guard
            case .failure(let dropped) = DeadLetterReplay.message(
                for: withoutHeaders, inboundExchange: "in", ownQueues: [])
        else {
            Issue.record("a dead letter without some headers was replayed")
            return
        }
        #expect(dropped.description.contains("digitalCardId (90000 bytes)"))
        #expect(self.letter(withoutHeaders).missing.count == 1)
        let forced = try replay(withoutHeaders, to: "in", force: true)
        #expect(forced.properties.headers == nil)
    }

    @Test func aBodyTheToolDidNotReadIsNeverReplayed() {
        var unread = message(body: "", headers: ["x-death": .array([Self.death("rejected", queue: "w")])])
        unread.withheldBodySize = 9_000_000
        guard
            case .failure(let refusal) = DeadLetterReplay.message(
                for: unread, inboundExchange: "in", ownQueues: [], force: true)
        else {
            Issue.record("an unread body was replayed (as empty)")
            return
        }
        #expect(refusal.description.contains("9000000 bytes"))
        #expect(!letter(unread).bodyRead && letter(unread).bodyBytes == 9_000_000)
    }

    // MARK: - A run's decisions

    func pass(_ command: DeadLetterPass.Command, filter: DeadLetterFilter = DeadLetterFilter()) -> DeadLetterPass {
        DeadLetterPass(
            command: command, filter: filter, deadLetterQueue: Self.deadLetterQueue, markerID: "run-1", now: now)
    }

    @Test func lookingKeepsEverythingThroughTheLoopAndEndsAtItsOwnMarker() {
        let look = pass(.look)
        let decision = look.decide(message(headers: ["x-worker-error": .string("bad")]))
        #expect(decision.action == .keep(.throughLoop) && decision.selected)
        let marker = look.marker
        #expect(marker.exchange == "" && marker.routingKey == Self.deadLetterQueue && marker.body.isEmpty)
        let own = DeadLetterMessage(body: [], properties: marker.properties, routingKey: Self.deadLetterQueue)
        #expect(look.decide(own).action == .end)
        var stale = own
        stale.properties.headers = [DeadLetterPass.markerHeader: .string("run-0")]
        let leftover = look.decide(stale)
        #expect(leftover.action == .remove && leftover.letter == nil, "an interrupted run's marker is removed")
    }

    @Test func aForgedXDeathIsKeptByACopyNotByTheBroker() {
        // RabbitMQ 3.x crashes the queue dead-lettering a message whose x-death array holds an entry that is not a
        // table (one that is not an array at all it replaces: `XDeathHeader`).
        let forged = message(
            headers: ["x-death": .array([.string("x")]), "x-worker-error": .string("bad")], userID: "backend")
        guard case .keep(.asCopy(let copy)) = pass(.look).decide(forged).action else {
            Issue.record("a forged x-death went to the broker's dead-lettering")
            return
        }
        #expect(copy.exchange == "\(Self.deadLetterQueue).loop" && copy.routingKey == forged.routingKey)
        #expect(copy.properties.headers?["x-death"] == .array([.string("x")]) && copy.body == forged.body)
        #expect(copy.properties.userID == nil && copy.properties.headers?["x-original-user-id"] == .string("backend"))
    }

    /// Issue 24: RabbitMQ 3.10's quorum queues move a window of rejected messages through the loop in no
    /// particular order (and at most once), so a quorum dead-letter queue keeps what the tool read by copies.
    @Test func aQuorumQueueKeepsWhatItReadByCopiesWhole() {
        var look = pass(.look)
        look.keepsByCopy = true
        let original = message(
            headers: [
                "x-worker-error": .string("bad"), "x-delivery-count": .int64(3), "traceparent": .string("00-a"),
            ],
            userID: "backend")
        guard case .keep(.asCopy(let copy)) = look.decide(original).action else {
            Issue.record("a readable dead letter of a quorum queue went through the loop")
            return
        }
        #expect(copy.exchange == "\(Self.deadLetterQueue).loop" && copy.routingKey == "backend.tns" && copy.mandatory)
        #expect(copy.body == original.body)
        var expected = original.properties
        expected.userID = nil
        expected.headers = [
            "x-worker-error": .string("bad"), "traceparent": .string("00-a"), "x-original-user-id": .string("backend"),
        ]
        #expect(copy.properties == expected, "the queue's return count left out, the user id moved aside")

        let counted = message(headers: ["x-delivery-count": .int64(1)])
        guard case .keep(.asCopy(let bare)) = look.decide(counted).action else {
            Issue.record("not copied")
            return
        }
        #expect(bare.properties.headers == nil, "no empty table where the queue's count was the only header")

        var unread = message(headers: ["x-worker-error": .string("bad")])
        unread.body = []
        unread.withheldBodySize = 300_000
        #expect(look.decide(unread).action == .keep(.throughLoop), "a body the tool did not read cannot be copied")
        let grown = message(headers: [
            "x-worker-error": .string("bad"), "filler": .bytes(.init(repeating: 0x61, count: 131_000)),
        ])
        #expect(look.decide(grown).action == .keep(.throughLoop), "a content header past the frame cannot be copied")

        var replay = pass(
            .replay(inboundExchange: "wallet.notifications", ownQueues: ["wallet.notifications.work"], force: false))
        replay.keepsByCopy = true
        guard case .keep(.asCopy) = replay.afterReplay(.nacked, of: original) else {
            Issue.record("a failed replay on a quorum queue went through the loop")
            return
        }
        #expect(replay.afterReplay(.confirmed, of: original) == .remove)
    }

    @Test func replayingPublishesTheSelectedKeepsTheRestAndRefusesTheTruncated() {
        var filter = DeadLetterFilter()
        filter.reason = "store"
        let replay = pass(
            .replay(inboundExchange: "wallet.notifications", ownQueues: ["wallet.notifications.work"], force: false),
            filter: filter)
        guard
            case .replay(let published) = replay.decide(
                message(headers: ["x-worker-error": .string("store unavailable")])
            ).action
        else {
            Issue.record("a matching dead letter was not replayed")
            return
        }
        #expect(published.exchange == "wallet.notifications")
        #expect(replay.decide(message(headers: ["x-worker-error": .string("not JSON")])).action == .keep(.throughLoop))
        let truncated = replay.decide(
            message(headers: [
                "x-worker-error": .string("store unavailable"), "x-worker-omitted-body-bytes": .int64(5),
            ]))
        #expect(truncated.action == .keep(.throughLoop) && truncated.selected && truncated.refusal != nil)
        let stored = message(headers: ["x-worker-error": .string("store unavailable")])
        #expect(replay.afterReplay(.confirmed, of: stored) == .remove)
        #expect(
            replay.afterReplay(.returned(replyCode: 312, replyText: "NO_ROUTE"), of: stored) == .keep(.throughLoop))
        #expect(replay.afterReplay(nil, of: stored) == .keep(.throughLoop))
    }

    @Test func purgingRemovesOnlyTheSelected() {
        var filter = DeadLetterFilter()
        filter.sender = "CPS"
        let purge = pass(.purge, filter: filter)
        #expect(purge.decide(message(body: #"{"sender":"CPS"}"#, headers: nil)).action == .remove)
        #expect(purge.decide(message(headers: nil)).action == .keep(.throughLoop))
    }

    /// Issue 24, item 8: `show` printed push tokens whole.
    @Test func showMasksAPushChannelUnlessAsked() throws {
        let installation = message(
            body: #"{"installationId":"inst-1","platform":"apns","pushChannel":"ABCDEF0123456789","tags":["a"]}"#,
            headers: ["x-worker-error": .string("x")])
        let masked = DeadLetterDetail.jsonLine(installation)
        #expect(!masked.contains("ABCDEF0123456789") && masked.contains("6789"), "\(masked)")
        #expect(masked.contains("inst-1"))
        #expect(DeadLetterDetail.jsonLine(installation, showPushChannel: true).contains("ABCDEF0123456789"))
    }

    @Test func theClosingLineSaysWhatCouldNotBeShownAndAnUndercount() {
        var summary = DeadLetterRunSummary()
        summary.seen = 2_500
        summary.selected = 2_500
        summary.undecodable = 2
        summary.reportedAtStart = 500
        let line = summary.closingLine(queue: "q", verb: "listed", count: 2_500)
        #expect(line.contains("2 could not be shown") && line.contains("reported 500"), "\(line)")
    }

    /// Issue 25: a message retried and then dead-lettered carries the work queue's name as its routing key; replay
    /// sends it where the backend did, and strips the record.
    @Test func replayUsesTheRecordedRoutingKeyAndStripsTheRecord() throws {
        let recorded: AMQPTable = [
            "x-original-exchange": .string("wallet.notifications"), "x-original-routing-key": .string("notification"),
            "x-retry-count": .int32(2), "x-worker-error": .string("gave up"),
        ]
        let message = DeadLetterMessage(
            body: Array("{}".utf8), properties: AMQPMessageProperties(headers: recorded),
            routingKey: "wallet.notifications.work")
        let replayed = try DeadLetterReplay.message(
            for: message, inboundExchange: "wallet.notifications", ownQueues: ["wallet.notifications.work"]
        ).get()
        #expect(replayed.exchange == "wallet.notifications")
        #expect(replayed.routingKey == "notification")
        #expect(replayed.properties.headers == nil, "every header added on the way is removed")
    }
}

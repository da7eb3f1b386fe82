import AMQPTransport
import Foundation
import Testing
import WalletMessages
import WalletRouting
import WalletStore

@testable import WalletWorker

/// Issue 13's hostile inputs, at the level of the pure plan (the broker-side proof is PoisonMessageTests).
@Suite struct HostileInputPlanTests {
    let topology = Topology()

    func original(headers: AMQPTable? = nil, expiration: String? = nil, userID: String? = nil) -> OriginalMessage {
        OriginalMessage(
            body: Array("not json".utf8),
            properties: AMQPMessageProperties(
                contentType: "application/json", headers: headers, deliveryMode: .persistent,
                expiration: expiration, messageID: "m1", userID: userID),
            routingKey: "backend.x")
    }

    @Test(arguments: [
        (AMQPFieldValue.int64(.max), 1_000_000), (.int64(.min), 0), (.int32(-5), 0), (.uint64(.max), 1_000_000),
        (.int8(3), 3), (.string("7"), 0),
    ])
    func recordedAttemptsAreClamped(header: AMQPFieldValue, expected: Int) {
        #expect(original(headers: ["x-retry-count": header]).failedAttempts == expected)
    }

    @Test func aHugeRetryCountIsDeadLetteredInsteadOfTrapping() {
        let plan = DeliveryPlan(
            original: original(headers: ["x-retry-count": .int64(.max)]), transientFailure: "store down",
            retry: .attempts(5), jitter: 0.5, topology: topology, frameMax: 131_072)
        #expect(plan.fate == .retriesExhausted(attempts: 1_000_001, error: "store down"))
        #expect(plan.messages.map(\.exchange) == [topology.deadLetterExchange])
    }

    @Test func aDeadLetterDoesNotInheritTheTTLOrTheUserID() throws {
        let letter = original(expiration: "60000", userID: "backend")
            .deadLetter(exchange: "dlx", reason: "bad", frameMax: 131_072)
        #expect(letter.properties.expiration == nil)
        #expect(letter.properties.userID == nil)
        #expect(letter.properties.headers?["x-original-expiration"] == .string("60000"))
        #expect(letter.properties.headers?["x-original-user-id"] == .string("backend"))
        #expect(letter.properties.headers?["x-worker-error"] == .string("bad"))
        #expect(letter.properties.messageID == "m1")
    }

    @Test func aDeadLetterThatWouldNotFitAFrameLeavesOutTheLargestHeaders() throws {
        let big = String(repeating: "t", count: 130_000)
        let letter = original(headers: ["traceparent": .string(big), "x-small": .int32(1)])
            .deadLetter(exchange: "dlx", reason: "bad", frameMax: 131_072)
        #expect(letter.properties.encodingProblem(frameMax: 131_072 - OriginalMessage.brokerHeaderAllowance) == nil)
        #expect(letter.properties.headers?["traceparent"] == nil)
        #expect(letter.properties.headers?["x-small"] == .int32(1))
        #expect(letter.properties.headers?["x-worker-dropped-headers"] == .string("traceparent (130005 bytes)"))
        #expect(
            letter.properties.headers?["x-worker-error"]?.textValue?.hasPrefix("bad; headers dropped to fit a frame")
                == true
        )
        // One that fits is untouched.
        let small = original(headers: ["traceparent": .string("00-a-b-01")])
            .deadLetter(exchange: "dlx", reason: "bad", frameMax: 131_072)
        #expect(small.properties.headers?["traceparent"] == .string("00-a-b-01"))
        #expect(small.properties.headers?["x-worker-dropped-headers"] == nil)
    }

    @Test func aBodyThatWasNeverReadIsRejectedToTheBroker() {
        var withheld = original()
        withheld.body = []
        withheld.withheldBodySize = 100_000_000
        let decision = StoredDecision(
            decision: Decision(
                effects: [], results: [], disposition: .deadLetter(reason: "body is too large"),
                outcome: .rejected, sender: nil, digitalCardId: nil),
            isReplay: false)
        let plan = DeliveryPlan(original: withheld, stored: decision, topology: topology, frameMax: 131_072)
        #expect(plan.isRejectedToBroker)
        #expect(plan.messages.isEmpty)
        let retry = DeliveryPlan(
            original: withheld, transientFailure: "x", retry: .attempts(5), jitter: 0.5, topology: topology,
            frameMax: 131_072)
        #expect(retry.isRejectedToBroker, "a body never kept cannot go to the retry queue")
    }

    /// RabbitMQ 3.10 replaces an `x-death` that is not an array (checked live for a string, an int, a float and a
    /// table); a queue crashes only on an array holding a non-table entry or an entry whose `count` is not an integer.
    @Test(
        arguments: [
            (nil, true),
            (.array([]), true),
            (.array([.table(["queue": .string("q"), "reason": .string("expired"), "count": .int64(3)])]), true),
            (.array([.table(["queue": .string("q")])]), true),
            (.array([.table(["count": .int64(.max)])]), true),
            (.string("forged"), true),
            (.int32(7), true),
            (.double(1.5), true),
            (.table(["count": .string("1")]), true),
            (.array([.string("x")]), false),
            (.array([.table(["count": .string("1")])]), false),
            (.array([.table(["count": .decimal(scale: 1, value: 10)])]), false),
            (.array([.table(["count": .float(1)])]), false),
            (.array([.table(["count": .double(1)])]), false),
        ] as [(AMQPFieldValue?, Bool)])
    func xDeathHeadersTheBrokerCanUpdate(value: AMQPFieldValue?, updatable: Bool) {
        var headers: AMQPTable = ["x-tenant": .string("eu")]
        headers["x-death"] = value
        #expect(XDeathHeader.brokerCanUpdate(headers) == updatable)
        #expect(XDeathHeader.bodyMustBeKept(AMQPMessageProperties(headers: headers)) == !updatable)
    }

    /// Issue 23, defect 7: a body over twice the limit whose `x-death` the broker can replace is left to the broker
    /// (it was dead-lettered by the worker with its body thrown away for any non-array `x-death`). One the broker
    /// cannot update is read whole by the transport (`bodyMustBeKept`) and dead-lettered by the worker, body untouched.
    @Test func aMalformedXDeathIsNeverLeftToTheBrokersDeadLettering() throws {
        var resettable = original(headers: ["x-death": .string("forged"), "x-tenant": .string("eu")])
        resettable.body = []
        resettable.withheldBodySize = 100_000_000
        let decision = StoredDecision(
            decision: Decision(
                effects: [], results: [], disposition: .deadLetter(reason: "body is too large"),
                outcome: .rejected, sender: nil, digitalCardId: nil),
            isReplay: false)
        let brokers = DeliveryPlan(original: resettable, stored: decision, topology: topology, frameMax: 131_072)
        #expect(brokers.isRejectedToBroker, "the broker replaces a non-array x-death and dead-letters the body whole")

        let forged: AMQPTable = ["x-death": .array([.string("x")]), "x-tenant": .string("eu")]
        var kept = original(headers: forged)
        kept.body = Array(repeating: UInt8(ascii: "a"), count: 200_000)
        let plan = DeliveryPlan(original: kept, stored: decision, topology: topology, frameMax: 131_072)
        #expect(!plan.isRejectedToBroker)
        let deadLetter = try #require(plan.messages.last)
        #expect(deadLetter.exchange == topology.deadLetterExchange && deadLetter.body == kept.body, "body untouched")
        #expect(deadLetter.properties.headers?["x-worker-omitted-body-bytes"] == nil)
        #expect(
            deadLetter.properties.headers?["x-death"] == .array([.string("x")]), "the dead letter keeps its headers")

        // A retry copy goes through the retry queue's TTL: the malformed header travels under another name.
        let retry = DeliveryPlan(
            original: original(headers: forged), transientFailure: "x", retry: .attempts(5), jitter: 0.5,
            topology: topology, frameMax: 131_072)
        let copy = try #require(retry.messages.first)
        #expect(copy.properties.headers?["x-death"] == nil)
        #expect(copy.properties.headers?["x-original-x-death"] == .array([.string("x")]))
        #expect(copy.properties.headers?["x-tenant"] == .string("eu"))
    }

    @Test func invalidUTF8CorrelationIDIsRejectedAndInvalidUTF8ReplyToMakesNoCopies() throws {
        var message = original()
        message.body = Array(#"{"action":"refresh"}"#.utf8)
        message.properties.correlationID = "\u{FFFD}"
        message.properties.undecodedStrings[.correlationID] = [0xFF]
        let inbound = InboundMessage(message)
        #expect(inbound.properties.correlationIDIsInvalidUTF8 && inbound.properties.correlationID == nil)
        let decision = try NotificationRouter().route(inbound, state: InMemoryWalletState(), now: Date())
        #expect(decision.outcome == .rejected)
        #expect(
            decision.results.first.map { String(decoding: $0.body, as: UTF8.self) }?
                .contains("correlation_id is not valid UTF-8") == true)
        #expect(decision.results.first?.properties.correlationID == "m1", "falls back to message_id")

        var replying = original()
        replying.body = Array(#"{"action":"refresh"}"#.utf8)
        replying.properties.replyTo = "\u{FFFD}"
        replying.properties.undecodedStrings[.replyTo] = [0xFF]
        let routed = try NotificationRouter().route(InboundMessage(replying), state: InMemoryWalletState(), now: Date())
        #expect(!routed.results.isEmpty && routed.results.allSatisfy { !$0.exchange.isEmpty }, "no reply_to copies")
        let plan = DeliveryPlan(
            original: replying, stored: StoredDecision(decision: routed, isReplay: false), topology: topology,
            frameMax: 131_072)
        #expect(plan.skippedReplyCopies == routed.results.count)
    }

    @Test func directReplyToCopiesAreSeparatedAndMalformedOnesSkipped() {
        let good = "amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxA==.mD+9en6VaDpb2ckwe0UOrg=="
        for (address, copies, skipped) in [(good, 1, 0), ("amq.rabbitmq.reply-to.g2gCZA==.AAAAAA==", 0, 1)] {
            let result = OutboundResult(
                exchange: "wallet.actions", routingKey: "action.x", body: [],
                properties: OutboundProperties(
                    messageID: "m1/0", correlationID: nil, type: "actionTriggered",
                    traceparent: nil))
            var copy = result
            copy.exchange = ""
            copy.routingKey = address
            let decision = StoredDecision(
                decision: Decision(
                    effects: [], results: [result, copy], disposition: .acknowledge,
                    outcome: .processed, sender: nil, digitalCardId: nil),
                isReplay: false)
            let plan = DeliveryPlan(original: original(), stored: decision, topology: topology, frameMax: 131_072)
            #expect(plan.messages.map(\.exchange) == ["wallet.actions"])
            #expect(plan.directReplies.count == copies)
            #expect(plan.skippedReplyCopies == skipped)
        }
    }

    @Test(arguments: [
        ("amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxA==.mD+9en6VaDpb2ckwe0UOrg==", true),
        ("amq.rabbitmq.reply-to.g2gCZA==.AAAAAA==", false),  // a truncated tuple
        // a byte too many
        ("amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxAA=.mD+9en6VaDpb2ckwe0UOrg==", false),
        // cut short
        ("amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUm.mD+9en6VaDpb2ckwe0UOrg==", false),
        ("amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxA==", false),  // no key
        ("amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxA==.", false),
        ("amq.rabbitmq.reply-to.!!!.AAAA", false),
        ("amq.rabbitmq.reply-to", true),  // an ordinary queue name: returned as unroutable, not fatal
        ("my-reply-queue", true),
    ])
    func directReplyToAddresses(address: String, publishable: Bool) {
        #expect(DirectReplyToAddress.isPublishable(address) == publishable)
    }

    @Test func requeueDelaysDoubleUpToTheCeilingAndReset() {
        var backoff = RequeueBackoff()
        #expect((0..<7).map { _ in backoff.next() } == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
        backoff.reset()
        #expect(backoff.next() == .seconds(1))
    }
}

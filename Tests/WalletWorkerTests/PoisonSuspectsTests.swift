import AMQPTransport
import Testing

@testable import WalletWorker

@Suite struct PoisonSuspectsTests {
    func key(_ id: String, body: String = "{}") -> PoisonSuspects.Key {
        PoisonSuspects.key(
            routingKey: "r", messageID: Array(id.utf8), correlationID: nil, body: Array(body.utf8),
            withheldBodySize: nil)
    }

    @Test func withNothingRecordedABatchIsOneSegment() {
        let suspects = PoisonSuspects()
        #expect(suspects.isEmpty)
        let segments = suspects.segments([key("a"), key("b"), key("c")])
        #expect(segments.map(\.range) == [0..<3])
        #expect(segments.map(\.isSuspect) == [false])
    }

    @Test func aFailureWithSeveralInFlightMakesSuspectsWithoutCountingAgainstThem() {
        var suspects = PoisonSuspects()
        suspects.recordFailure(inFlight: [key("a"), key("b"), key("c")], signature: "541", error: "boom")
        #expect(suspects.condemned(key("a")) == nil)
        // Suspects are cut out of the next batch, one segment each, in order.
        let segments = suspects.segments([key("x"), key("b"), key("y"), key("z"), key("a")])
        #expect(segments.map(\.range) == [0..<1, 1..<2, 2..<4, 4..<5])
        #expect(segments.map(\.isSuspect) == [false, true, false, true])
    }

    @Test func failingAloneTheSameWayTheLimitTimesCondemnsTheMessage() throws {
        var suspects = PoisonSuspects()
        for round in 1...PoisonSuspects().failureLimit {
            #expect(suspects.condemned(key("p")) == nil, "condemned after \(round - 1) failures")
            suspects.recordFailure(inFlight: [key("p")], signature: "541", error: "closed 541")
        }
        let record = try #require(suspects.condemned(key("p")))
        #expect(record.failures == PoisonSuspects().failureLimit)
        #expect(record.error == "closed 541")
        // Another message with the same id but another body is another message.
        #expect(suspects.condemned(key("p", body: "[]")) == nil)
    }

    @Test func aDifferentErrorStartsTheCountAgain() {
        var suspects = PoisonSuspects()
        suspects.recordFailure(inFlight: [key("p")], signature: "541", error: "a")
        suspects.recordFailure(inFlight: [key("p")], signature: "541", error: "a")
        suspects.recordFailure(inFlight: [key("p")], signature: "505", error: "b")
        #expect(suspects.condemned(key("p")) == nil)
        suspects.recordFailure(inFlight: [key("p")], signature: "505", error: "b")
        suspects.recordFailure(inFlight: [key("p")], signature: "505", error: "b")
        #expect(suspects.condemned(key("p"))?.error == "b")
    }

    @Test func aSettledMessageIsForgotten() {
        var suspects = PoisonSuspects()
        suspects.recordFailure(inFlight: [key("p")], signature: "541", error: "a")
        suspects.recordSettled([key("p")])
        #expect(suspects.isEmpty)
    }

    @Test func connectionLossesAndMissingExchangesAreNotTheMessagesFault() {
        #expect(PoisonSuspects.signature(of: AMQPError(code: .connectionLost, message: "reset")) == nil)
        #expect(PoisonSuspects.signature(of: AMQPError(code: .heartbeatTimeout, message: "silent")) == nil)
        #expect(PoisonSuspects.signature(of: CancellationError()) == nil)
        var forced = AMQPError(code: .connectionClosedByBroker, message: "shutdown")
        forced.replyCode = 320
        #expect(PoisonSuspects.signature(of: forced) == nil)
        var missing = AMQPError(code: .channelClosedByBroker, message: "no exchange")
        missing.replyCode = 404
        #expect(PoisonSuspects.signature(of: missing) == nil)
        var internalError = AMQPError(code: .connectionClosedByBroker, message: "internal")
        internalError.replyCode = 541
        #expect(PoisonSuspects.signature(of: internalError) != nil)
        var refused = AMQPError(code: .channelClosedByBroker, message: "user_id")
        refused.replyCode = 406
        #expect(PoisonSuspects.signature(of: refused) != nil)
        #expect(PoisonSuspects.signature(of: AMQPError(code: .protocolError, message: "bad frame")) != nil)
    }

    /// Issue 23, defect 4: the broker's consumer timeout closes the channel with a 406 too, but holding deliveries
    /// for the store is not the messages' fault; counted, it condemned valid notifications after three timeouts.
    @Test func theBrokersConsumerTimeoutIsNotTheMessagesFault() {
        let timedOut = AMQPError(
            code: .channelClosedByBroker, message: "channel closed by the broker", replyCode: 406,
            replyText: "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: "
                + "1800000 ms. This timeout value can be configured, see consumers doc guide to learn more")
        #expect(PoisonSuspects.signature(of: timedOut) == nil)
        var suspects = PoisonSuspects()
        #expect(PoisonSuspects.isConsumerTimeout(timedOut))
        // What the lifecycle does with a session failure: nothing is recorded without a signature.
        if let signature = PoisonSuspects.signature(of: timedOut) {
            suspects.recordFailure(inFlight: [key("held")], signature: signature, error: "\(timedOut)")
        }
        #expect(suspects.isEmpty)
    }

    @Test func itForgetsTheOldestBeyondItsCapacity() {
        var suspects = PoisonSuspects()
        for index in 0...PoisonSuspects().capacity {
            suspects.recordFailure(inFlight: [key("m\(index)"), key("n\(index)")], signature: "x", error: "x")
        }
        #expect(suspects.segments([key("m0")]).map(\.isSuspect) == [false], "the oldest is forgotten")
        #expect(suspects.segments([key("n\(PoisonSuspects().capacity)")]).map(\.isSuspect) == [true])
    }
}

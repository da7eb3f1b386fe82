import AMQPTransport
import Testing

@testable import WalletWorker

@Suite struct PoisonGuardTests {
    func key(_ id: String, body: String = "{}") -> PoisonGuard.Key {
        PoisonGuard.key(routingKey: "r", messageID: Array(id.utf8), correlationID: nil, body: Array(body.utf8),
                        withheldBodySize: nil)
    }

    @Test func withNothingRecordedABatchIsOneSegment() {
        let guardian = PoisonGuard()
        #expect(guardian.isEmpty)
        let segments = guardian.segments(keys: [key("a"), key("b"), key("c")])
        #expect(segments.map(\.range) == [0..<3])
        #expect(segments.map(\.isSuspect) == [false])
    }

    @Test func aFailureWithSeveralInFlightMakesSuspectsWithoutCountingAgainstThem() {
        let guardian = PoisonGuard()
        guardian.recordFailure(inFlight: [[key("a"), key("b")], [key("c")]], signature: "541", error: "boom")
        #expect(guardian.condemned(key: key("a")) == nil)
        // Suspects are cut out of the next batch, one segment each, in order.
        let segments = guardian.segments(keys: [key("x"), key("b"), key("y"), key("z"), key("a")])
        #expect(segments.map(\.range) == [0..<1, 1..<2, 2..<4, 4..<5])
        #expect(segments.map(\.isSuspect) == [false, true, false, true])
    }

    @Test func failingAloneTheSameWayTheLimitTimesCondemnsTheMessage() throws {
        let guardian = PoisonGuard()
        for round in 1...PoisonGuard.failureLimit {
            #expect(guardian.condemned(key: key("p")) == nil, "condemned after \(round - 1) failures")
            guardian.recordFailure(inFlight: [[key("p")]], signature: "541", error: "closed 541")
        }
        let record = try #require(guardian.condemned(key: key("p")))
        #expect(record.failures == PoisonGuard.failureLimit)
        #expect(record.error == "closed 541")
        // Another message with the same id but another body is another message.
        #expect(guardian.condemned(key: key("p", body: "[]")) == nil)
    }

    @Test func aDifferentErrorStartsTheCountAgain() {
        let guardian = PoisonGuard()
        guardian.recordFailure(inFlight: [[key("p")]], signature: "541", error: "a")
        guardian.recordFailure(inFlight: [[key("p")]], signature: "541", error: "a")
        guardian.recordFailure(inFlight: [[key("p")]], signature: "505", error: "b")
        #expect(guardian.condemned(key: key("p")) == nil)
        guardian.recordFailure(inFlight: [[key("p")]], signature: "505", error: "b")
        guardian.recordFailure(inFlight: [[key("p")]], signature: "505", error: "b")
        #expect(guardian.condemned(key: key("p"))?.error == "b")
    }

    @Test func aSettledMessageIsForgotten() {
        let guardian = PoisonGuard()
        guardian.recordFailure(inFlight: [[key("p")]], signature: "541", error: "a")
        guardian.recordSettled(keys: [key("p")])
        #expect(guardian.isEmpty)
    }

    @Test func connectionLossesAndMissingExchangesAreNotTheMessagesFault() {
        #expect(PoisonGuard.signature(of: AMQPError(code: .connectionLost, message: "reset")) == nil)
        #expect(PoisonGuard.signature(of: AMQPError(code: .heartbeatTimeout, message: "silent")) == nil)
        #expect(PoisonGuard.signature(of: CancellationError()) == nil)
        var forced = AMQPError(code: .connectionClosedByBroker, message: "shutdown")
        forced.replyCode = 320
        #expect(PoisonGuard.signature(of: forced) == nil)
        var missing = AMQPError(code: .channelClosedByBroker, message: "no exchange")
        missing.replyCode = 404
        #expect(PoisonGuard.signature(of: missing) == nil)
        var internalError = AMQPError(code: .connectionClosedByBroker, message: "internal")
        internalError.replyCode = 541
        #expect(PoisonGuard.signature(of: internalError) != nil)
        var refused = AMQPError(code: .channelClosedByBroker, message: "user_id")
        refused.replyCode = 406
        #expect(PoisonGuard.signature(of: refused) != nil)
        #expect(PoisonGuard.signature(of: AMQPError(code: .protocolError, message: "bad frame")) != nil)
    }

    @Test func itForgetsTheOldestBeyondItsCapacity() {
        let guardian = PoisonGuard()
        for index in 0...PoisonGuard.capacity {
            guardian.recordFailure(inFlight: [[key("m\(index)"), key("n\(index)")]], signature: "x", error: "x")
        }
        #expect(guardian.segments(keys: [key("m0")]).map(\.isSuspect) == [false], "the oldest is forgotten")
        #expect(guardian.segments(keys: [key("n\(PoisonGuard.capacity)")]).map(\.isSuspect) == [true])
    }
}

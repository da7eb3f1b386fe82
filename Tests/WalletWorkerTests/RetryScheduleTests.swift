import AMQPTransport
import Testing

@testable import WalletWorker

extension RetrySchedule {
    /// The defaults (5 s doubling up to 5 minutes) with `count` attempts.
    static func attempts(_ count: Int) -> RetrySchedule {
        RetrySchedule(firstDelay: .seconds(5), longestDelay: .seconds(300), attempts: count)
    }
}

/// Issue 13: a message's own transient failures wait exponentially longer, with jitter, in one retry queue per
/// level (a queue expires messages only at its head, so waits of different lengths cannot share one).
@Suite struct RetryScheduleTests {
    @Test func theDefaultsWaitFiveTenTwentyFortySeconds() {
        let schedule = RetrySchedule.attempts(5)
        #expect(schedule.levels == 4)
        #expect((1...4).map(schedule.ttl(level:)) == [.seconds(5), .seconds(10), .seconds(20), .seconds(40)])
        #expect((1...4).map { schedule.level(afterAttempt: $0) } == [1, 2, 3, 4])
        #expect(schedule.queues("r").map(\.name) == ["r", "r.2", "r.3", "r.4"])
    }

    @Test func theWaitStopsGrowingAtTheLongestDelayAndLaterAttemptsShareThatQueue() {
        let schedule = RetrySchedule(firstDelay: .seconds(5), longestDelay: .seconds(30), attempts: 20)
        #expect(schedule.levels == 4, "5, 10, 20, then 30 s for every later retry")
        #expect(schedule.ttl(level: 4) == .seconds(30))
        #expect(schedule.ttl(level: 60) == .seconds(30), "no overflow however far the level")
        #expect(schedule.level(afterAttempt: 19) == 4)
    }

    /// How long a message's retries took at least, the horizon a last attempt's dead letter looks back over
    /// (`ResultsKillSwitch.lastAttemptRefused`): level 1 exactly, every later level at least half its TTL.
    @Test func theShortestWaitBeforeAnAttemptSumsTheLevelsFloors() {
        let schedule = RetrySchedule.attempts(5)
        let floors: [Duration] = [.zero, .seconds(5), .seconds(10), .seconds(20), .seconds(40)]
        #expect((1...5).map(schedule.shortestWait(beforeAttempt:)) == floors)
        let capped = RetrySchedule(firstDelay: .seconds(5), longestDelay: .seconds(30), attempts: 20)
        let cappedFloors: Int64 = 5 + 5 + 10 + 15 + 15 + 15
        #expect(capped.shortestWait(beforeAttempt: 7) == .seconds(cappedFloors))
        #expect(RetrySchedule.attempts(1).shortestWait(beforeAttempt: 1) == .zero)
    }

    @Test func oneOrTwoAttemptsNeedOnlyTheContractsRetryQueue() {
        #expect(RetrySchedule.attempts(1).levels == 1)
        #expect(RetrySchedule.attempts(2).levels == 1)
        #expect(RetrySchedule.attempts(3).levels == 2)
    }

    @Test func aLongestDelayBelowTheFirstIsTheFirst() {
        let schedule = RetrySchedule(firstDelay: .seconds(10), longestDelay: .seconds(1), attempts: 5)
        #expect(schedule.levels == 1)
        #expect(schedule.ttl(level: 3) == .seconds(10))
    }

    @Test func levelOneWaitsTheQueuesTTLExactlyLaterLevelsDrawFromTheUpperHalf() {
        let schedule = RetrySchedule.attempts(5)
        #expect(schedule.expiration(level: 1, fraction: 0.3) == nil, "CONTRACT §1: the retry queue's TTL is the delay")
        #expect(schedule.expiration(level: 2, fraction: 0) == .seconds(5))
        #expect(schedule.expiration(level: 2, fraction: 0.5) == .milliseconds(7_500))
        #expect(schedule.expiration(level: 2, fraction: 0.999_999) == .milliseconds(9_999))
        #expect(schedule.expiration(level: 4, fraction: 1) == .seconds(40), "never above the queue's TTL")
        #expect(schedule.expiration(level: 3, fraction: -1) == .seconds(10), "a fraction out of range is clamped")
    }

    @Test func theRetryCopyCarriesItsLevelsQueueAndExpirationAndKeepsTheOriginalsExpiration() throws {
        let topology = Topology()
        let original = OriginalMessage(
            body: Array("{}".utf8),
            properties: AMQPMessageProperties(
                headers: ["x-retry-count": .int32(2)], deliveryMode: .persistent, expiration: "60000",
                messageID: "m1"),
            routingKey: "backend.tns")
        let plan = DeliveryPlan(
            original: original, transientFailure: "publish not confirmed", retry: .attempts(5), jitter: 0.5,
            topology: topology, frameMax: 131_072)
        #expect(plan.fate == .retried(attempt: 3, error: "publish not confirmed"))
        let copy = try #require(plan.messages.first)
        #expect(copy.exchange == "")
        #expect(copy.routingKey == "wallet.notifications.retry.3")
        #expect(copy.properties.expiration == "15000", "the upper half of level 3's 20 s")
        #expect(copy.properties.headers?["x-original-expiration"] == .string("60000"))

        // The first retry: the contract's queue, its TTL alone.
        let first = DeliveryPlan(
            original: OriginalMessage(
                body: [], properties: AMQPMessageProperties(expiration: "60000"), routingKey: "k"),
            transientFailure: "x", retry: .attempts(5), jitter: 0.5, topology: topology, frameMax: 131_072)
        let firstCopy = try #require(first.messages.first)
        #expect(firstCopy.routingKey == "wallet.notifications.retry")
        #expect(firstCopy.properties.expiration == nil, "the message's own TTL no longer shortens the wait")
        #expect(firstCopy.properties.headers?["x-original-expiration"] == .string("60000"))
    }

    @Test func aShardsRetriesGoToTheShardsOwnLevels() throws {
        var topology = Topology()
        topology.retryQueue = "wallet.notifications.retry.shard.2"
        let plan = DeliveryPlan(
            original: OriginalMessage(
                body: [], properties: AMQPMessageProperties(headers: ["x-retry-count": .int32(1)]), routingKey: "k"),
            transientFailure: "x", retry: .attempts(5), jitter: 0, topology: topology, frameMax: 131_072)
        #expect(plan.messages.first?.routingKey == "wallet.notifications.retry.shard.2.2")
        #expect(plan.messages.first?.properties.expiration == "5000")
    }
}

import Locking
import Testing

@testable import AMQPTransport

/// A clock that moves only when a test moves it: deadlines are tested without waiting.
struct ManualClock: Clock {
    struct Instant: InstantProtocol {
        var offset: Swift.Duration

        func advanced(by duration: Swift.Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Swift.Duration { other.offset - offset }
        static func < (left: Instant, right: Instant) -> Bool { left.offset < right.offset }
    }

    private let current = Locked(Instant(offset: .zero))

    var now: Instant { current.withLock { $0 } }
    var minimumResolution: Swift.Duration { .zero }

    func advance(by duration: Swift.Duration) {
        current.withLock { $0 = $0.advanced(by: duration) }
    }

    func sleep(until deadline: Instant, tolerance: Swift.Duration?) async throws {
        // Nothing here sleeps: the waiters are asked about the time, never wait for it.
        throw CancellationError()
    }
}

@Suite("Confirm waiters: batches, deadlines, blocked connections")
struct ConfirmWaitersTests {
    private let clock = ManualClock()

    private func messages(_ count: Int) -> [AMQPOutboundMessage] {
        (0..<count).map { AMQPOutboundMessage(exchange: "x", routingKey: "rk", body: [UInt8($0)]) }
    }

    private func outcomes(_ settlement: ConfirmWaiters<ManualClock>.Settlement?) -> [AMQPPublishOutcome]? {
        guard case .success(let outcomes)? = settlement?.result else { return nil }
        return outcomes
    }

    private func error(_ settlement: ConfirmWaiters<ManualClock>.Settlement?) -> AMQPError? {
        guard case .failure(let error)? = settlement?.result else { return nil }
        return error
    }

    @Test func batchesAreNumberedFromOneAndSentAtOnceWhenNotBlocked() {
        var waiters = ConfirmWaiters(clock: clock)
        #expect(
            waiters.admit(messages(2), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
                == .send(batch: 1))
        #expect(
            waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
                == .send(batch: 2))
        #expect(ConfirmWaiters<ManualClock>.unwatchedBatch == 0, "publishes nobody waits for never match a real batch")
        #expect(waiters.isWaiting(batch: 1) && waiters.isWaiting(batch: 2))
    }

    @Test func aBatchIsAnsweredOnceEveryPublishIsResolvedInItsOrder() {
        var waiters = ConfirmWaiters(clock: clock)
        let pending = AMQPPendingConfirms()
        _ = waiters.admit(messages(3), channel: 1, timeout: .seconds(5), pending: pending)
        #expect(waiters.resolve([.init(batch: 1, index: 2, outcome: .nacked)]).isEmpty)
        #expect(waiters.resolve([.init(batch: 1, index: 0, outcome: .confirmed)]).isEmpty)
        let settled = waiters.resolve([
            .init(batch: 1, index: 1, outcome: .returned(replyCode: 312, replyText: "NO_ROUTE"))
        ])
        #expect(settled.count == 1)
        #expect(settled.first?.pending === pending)
        #expect(outcomes(settled.first) == [.confirmed, .returned(replyCode: 312, replyText: "NO_ROUTE"), .nacked])
        #expect(waiters.isEmpty)
    }

    @Test func theFirstOutcomeReportedForAPublishWins() {
        var waiters = ConfirmWaiters(clock: clock)
        _ = waiters.admit(messages(2), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
        #expect(waiters.resolve([.init(batch: 1, index: 0, outcome: .unencodable(reason: "too big"))]).isEmpty)
        #expect(
            waiters.resolve([.init(batch: 1, index: 0, outcome: .confirmed)]).isEmpty,
            "a second answer does not count twice")
        let settled = waiters.resolve([.init(batch: 1, index: 1, outcome: .confirmed)])
        #expect(outcomes(settled.first) == [.unencodable(reason: "too big"), .confirmed])
    }

    @Test func resolutionsOfUnknownBatchesAreIgnored() {
        var waiters = ConfirmWaiters(clock: clock)
        #expect(
            waiters.resolve([
                .init(batch: 0, index: 0, outcome: .confirmed), .init(batch: 9, index: 0, outcome: .confirmed),
            ]).isEmpty)
    }

    @Test func batchesAreHeldWhileBlockedAndReleasedInOrder() {
        var waiters = ConfirmWaiters(clock: clock)
        waiters.block()
        #expect(waiters.isBlocked)
        #expect(
            waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
                == .held(batch: 1))
        #expect(
            waiters.admit(messages(2), channel: 2, timeout: .seconds(5), pending: AMQPPendingConfirms())
                == .held(batch: 2))
        let released = waiters.unblock()
        #expect(!waiters.isBlocked)
        #expect(released.map(\.batch) == [1, 2])
        #expect(released.map(\.channel) == [1, 2])
        #expect(released.map(\.messages.count) == [1, 2])
        #expect(waiters.unblock().isEmpty, "released once")
        #expect(
            waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
                == .send(batch: 3))
    }

    @Test func aFailedConnectionAnswersEveryWaiterAndDropsWhatWasHeld() {
        var waiters = ConfirmWaiters(clock: clock)
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
        waiters.block()
        _ = waiters.admit(messages(1), channel: 2, timeout: .seconds(5), pending: AMQPPendingConfirms())
        let settled = waiters.failAll(AMQPError(code: .connectionLost, message: "gone"))
        #expect(settled.count == 2)
        #expect(settled.allSatisfy { error($0)?.code == .connectionLost })
        #expect(waiters.isEmpty)
        #expect(waiters.unblock().isEmpty)
    }

    @Test func aClosedChannelAnswersOnlyItsOwnWaiters() {
        var waiters = ConfirmWaiters(clock: clock)
        let onOne = AMQPPendingConfirms()
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: onOne)
        _ = waiters.admit(messages(1), channel: 2, timeout: .seconds(5), pending: AMQPPendingConfirms())
        waiters.block()
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: AMQPPendingConfirms())
        _ = waiters.admit(messages(1), channel: 2, timeout: .seconds(5), pending: AMQPPendingConfirms())
        let settled = waiters.failChannel(1, AMQPError(code: .channelClosedByBroker, message: "404"))
        #expect(settled.count == 2)
        #expect(settled.contains { $0.pending === onOne })
        #expect(settled.allSatisfy { error($0)?.code == .channelClosedByBroker })
        #expect(!waiters.isWaiting(batch: 1) && waiters.isWaiting(batch: 2) && !waiters.isWaiting(batch: 3))
        #expect(waiters.unblock().map(\.batch) == [4], "the closed channel's held batch is dropped")
    }

    @Test func aWaiterExpiresAtItsDeadlineWithWhatWasStillMissing() {
        var waiters = ConfirmWaiters(clock: clock)
        _ = waiters.admit(messages(3), channel: 7, timeout: .seconds(5), pending: AMQPPendingConfirms())
        _ = waiters.resolve([.init(batch: 1, index: 0, outcome: .confirmed)])
        clock.advance(by: .milliseconds(4_999))
        #expect(waiters.expireOverdue().isEmpty)
        clock.advance(by: .milliseconds(1))
        let expired = waiters.expireOverdue()
        #expect(expired.map(\.batch) == [1])
        #expect(expired.map(\.channel) == [7])
        #expect(error(expired.first?.settlement)?.code == .timeout)
        #expect(error(expired.first?.settlement)?.message == "2 of 3 publishes were not confirmed in time")
        #expect(waiters.isEmpty)
        #expect(
            waiters.resolve([
                .init(batch: 1, index: 1, outcome: .confirmed), .init(batch: 1, index: 2, outcome: .confirmed),
            ]).isEmpty)
    }

    @Test func anExpiredHeldBatchIsNeverSent() {
        var waiters = ConfirmWaiters(clock: clock)
        waiters.block()
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(1), pending: AMQPPendingConfirms())
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(10), pending: AMQPPendingConfirms())
        clock.advance(by: .seconds(2))
        #expect(waiters.expireOverdue().map(\.batch) == [1])
        #expect(waiters.unblock().map(\.batch) == [2])
    }

    @Test func theTimeUntilTheNextDeadlineIsBoundedAndNeverNegative() {
        var waiters = ConfirmWaiters(clock: clock)
        #expect(waiters.timeUntilNextDeadline(atMost: .milliseconds(200)) == .milliseconds(200))
        _ = waiters.admit(messages(1), channel: 1, timeout: .milliseconds(150), pending: AMQPPendingConfirms())
        _ = waiters.admit(messages(1), channel: 1, timeout: .milliseconds(80), pending: AMQPPendingConfirms())
        #expect(waiters.timeUntilNextDeadline(atMost: .milliseconds(200)) == .milliseconds(80))
        #expect(waiters.timeUntilNextDeadline(atMost: .milliseconds(50)) == .milliseconds(50))
        clock.advance(by: .milliseconds(100))
        #expect(waiters.timeUntilNextDeadline(atMost: .milliseconds(200)) == .zero)
    }

    @Test func aSettlementReachesWhoeverAwaitsTheOutcomes() async throws {
        var waiters = ConfirmWaiters(clock: clock)
        let pending = AMQPPendingConfirms()
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: pending)
        for settlement in waiters.resolve([.init(batch: 1, index: 0, outcome: .confirmed)]) { settlement.deliver() }
        #expect(try await pending.outcomes() == [.confirmed])

        let failed = AMQPPendingConfirms()
        _ = waiters.admit(messages(1), channel: 1, timeout: .seconds(5), pending: failed)
        for settlement in waiters.failAll(AMQPError(code: .connectionLost, message: "gone")) { settlement.deliver() }
        await #expect(throws: AMQPError.self) { try await failed.outcomes() }
    }
}

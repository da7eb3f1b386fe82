import Testing

@testable import WalletWorker

/// CONTRACT.md §10 across reconnects: when a session that followed a failed one may consume.
@Suite("Consumer release") struct ConsumerReleaseTests {
    static let release = ConsumerRelease(
        consumersWithTheLastSession: 3, failedAt: .seconds(100), bound: ConsumerRelease.bound(heartbeat: .seconds(10)))

    @Test func theBoundIsTwoHeartbeatsAndFiveSecondsOrThirtyWithoutHeartbeats() {
        #expect(ConsumerRelease.bound(heartbeat: .seconds(10)) == .seconds(25))
        #expect(ConsumerRelease.bound(heartbeat: .seconds(60)) == .seconds(125))
        #expect(ConsumerRelease.bound(heartbeat: .zero) == .seconds(30))
    }

    @Test(
        arguments: [
            // The old consumer still counted (3 with it): wait, a poll interval at a time.
            (3, Duration.seconds(100), ConsumerRelease.Step.countAgain(after: .milliseconds(250))),
            // Another replica joined: still no sign the old one is gone.
            (4, .seconds(110), .countAgain(after: .milliseconds(250))),
            // One fewer than with the last session: the broker dropped its consumer.
            (2, .seconds(101), .consumeReleased),
            (0, .seconds(100), .consumeReleased),
            // The last poll waits only what is left of the bound.
            (3, .milliseconds(124_900), .countAgain(after: .milliseconds(100))),
            // Past the bound the broker has noticed, whatever the count says.
            (3, .seconds(125), .consumeBoundPassed),
            (5, .seconds(200), .consumeBoundPassed),
        ])
    func whatACountMeans(consumers: Int, now: Duration, step: ConsumerRelease.Step) {
        #expect(Self.release.next(consumers: consumers, now: now) == step)
    }
}

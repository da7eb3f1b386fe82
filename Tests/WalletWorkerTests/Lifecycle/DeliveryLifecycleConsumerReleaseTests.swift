import AMQPTransport
import Testing

@testable import WalletWorker

/// CONTRACT.md §10 across reconnects: the session after a failed one waits for the broker to drop its consumer.
@Suite("Delivery lifecycle: the next session after a failure") struct DeliveryLifecycleConsumerReleaseTests {
    typealias H = LifecycleHarness

    static func harness() -> H {
        var h = H { $0.consumerReleaseBound = .seconds(25) }
        h.start()
        _ = h.apply(h.machine.sessionStarted(h.connects.removeFirst(), frameMax: 131_072, consumers: 2, now: h.now))
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        return h
    }

    private static func release(in actions: [LifecycleAction]) -> ConsumerRelease?? {
        for action in actions {
            if case .connect(_, _, let release) = action { return .some(release) }
        }
        return nil
    }

    @Test func aConsumingSessionThatFailsMakesTheNextOneWaitForItsConsumer() {
        var h = Self.harness()
        h.receive([1, 2])
        h.now = .seconds(40)
        h.sessionFailed()
        let actions = h.machine.sessionClosed(h.endedSessions.removeFirst(), now: h.now)
        let release = Self.release(in: actions)
        #expect(
            release
                == .some(ConsumerRelease(consumersWithTheLastSession: 2, failedAt: .seconds(40), bound: .seconds(25))))
    }

    @Test func aFailedConnectKeepsTheWaitAndAStartedSessionEndsIt() {
        var h = Self.harness()
        h.sessionFailed()
        h.closed()
        // The next session's connect fails: the one after still waits for the first failure's consumer.
        let second = h.connects.removeFirst()
        _ = h.apply(h.machine.sessionFailed(second, error: AMQPErrorForTests.refused, now: h.now))
        let actions = h.machine.sessionClosed(second, now: h.now)
        #expect(Self.release(in: actions)??.failedAt == .zero)
        // Once a session consumes, the next failure is its own.
        guard case .connect(let third, _, _)? = actions.first(where: { if case .connect = $0 { true } else { false } })
        else {
            Issue.record("no connect")
            return
        }
        _ = h.machine.sessionStarted(third, frameMax: 131_072, consumers: 5, now: .seconds(9))
        let after = h.machine.sessionFailed(third, error: AMQPErrorForTests.refused, now: .seconds(9))
        #expect(after.contains { if case .endSession = $0 { true } else { false } })
        let next = h.machine.sessionClosed(third, now: .seconds(9))
        #expect(Self.release(in: next)??.consumersWithTheLastSession == 5)
        #expect(Self.release(in: next)??.failedAt == .seconds(9))
    }

    @Test func withoutABoundOrAfterACleanEndNoSessionWaits() {
        var h = H()
        h.start()
        h.started()
        h.sessionFailed()
        #expect(Self.release(in: h.machine.sessionClosed(h.endedSessions.removeFirst(), now: h.now)) == .some(nil))

        var stopped = Self.harness()
        stopped.consumerEnded()
        let actions = stopped.machine.sessionClosed(stopped.endedSessions.removeFirst(), now: stopped.now)
        #expect(Self.release(in: actions) == .some(nil), "a consumer that ended cleanly held nothing back")
    }
}

private enum AMQPErrorForTests {
    static let refused = AMQPError(code: .connectionFailed, message: "refused")
}

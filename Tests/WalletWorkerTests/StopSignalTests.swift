import Testing

@testable import WalletWorker

@Suite struct StopSignalTests {
    @Test(.timeLimit(.minutes(1))) func sleepEndsWhenTheSignalFires() async {
        let signal = StopSignal(clock: .continuous)
        let clock = ContinuousClock()
        let start = clock.now
        async let slept: Void = signal.sleep(for: .seconds(3_600))
        try? await Task.sleep(for: .milliseconds(50))
        signal.stop()
        await slept
        // Far below the hour it would sleep: on a loaded 2-core runner, starting up can stall tests for seconds.
        #expect(clock.now - start < .seconds(30))
        #expect(signal.isStopped)
    }

    @Test func handlersRunOnceAndLateHandlersRunAtOnce() {
        let signal = StopSignal(clock: .continuous)
        let calls = Counter()
        signal.onStop { calls.add() }
        let removed = signal.onStop { calls.add() }
        signal.removeHandler(removed)
        signal.stop()
        signal.stop()
        #expect(calls.value == 1)
        signal.onStop { calls.add() }
        #expect(calls.value == 2)
    }

    final class Counter: @unchecked Sendable {
        // Only touched from the test's own thread.
        var value = 0
        func add() { value += 1 }
    }
}

import Testing
@testable import AMQPTransport

/// A worker stopping while the broker blocks its connection (a resource alarm) must not wait out the confirm
/// timeout: ServiceLifecycle gives a cancelled service 2 s before it ends the process with a fatal error.
@Suite("Waiting for confirms honours cancellation")
struct PendingConfirmsCancellationTests {
    @Test func aCancelledWaitThrowsAtOnceAndOthersStillGetTheOutcomes() async throws {
        let pending = AMQPPendingConfirms()
        let cancelled = Task { try await pending.outcomes() }
        let patient = Task { try await pending.outcomes() }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        cancelled.cancel()
        await #expect(throws: AMQPError.self) { try await cancelled.value }
        #expect(ContinuousClock.now - started < .seconds(1))

        pending.resume(returning: [.confirmed])
        #expect(try await patient.value == [.confirmed])
    }

    @Test func aWaitStartedCancelledThrowsWithoutWaiting() async throws {
        let pending = AMQPPendingConfirms()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pending.outcomes()
        }
        await #expect(throws: AMQPError.self) { try await task.value }
        // A settled batch answers even a cancelled task: the outcome is known.
        pending.resume(returning: [.confirmed])
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await pending.outcomes()
        }
        #expect(try await late.value == [.confirmed])
    }
}

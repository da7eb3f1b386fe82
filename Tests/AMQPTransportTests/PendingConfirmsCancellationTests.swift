import Testing

@testable import AMQPTransport

/// A worker stopping while the broker blocks its connection (a resource alarm) must not wait out the confirm
/// timeout: ServiceLifecycle gives a cancelled service 2 s before it ends the process with a fatal error.
@Suite("Waiting for confirms honours cancellation")
struct PendingConfirmsCancellationTests {
    @Test func aCancelledWaitThrowsWithoutTheOutcomesAndOthersStillGetThem() async throws {
        let pending = AMQPPendingConfirms()
        let cancelled = Task { try await pending.outcomes() }
        let patient = Task { try await pending.outcomes() }
        try await Task.sleep(for: .milliseconds(50))
        // The outcomes arrive only once the cancelled wait has ended, or after 30 s as a net: a wait that ignored
        // its cancellation would then return them instead of throwing (no wall-clock bound, which a loaded
        // runner breaks).
        let net = Task {
            try? await Task.sleep(for: .seconds(30))
            pending.resume(returning: [.confirmed])
        }
        cancelled.cancel()
        await #expect(throws: AMQPError.self) { try await cancelled.value }

        net.cancel()
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

// The one polling helper of the tests: every "wait until" goes through `eventually`.

/// `eventually` gave up: what it waited for, for how long, and the last error the condition threw, if any.
public struct NotEventually: Error, CustomStringConvertible {
    public var what: String
    public var limit: Duration
    public var description: String { "gave up after \(limit) waiting (eventually): \(what)" }
}

/// Checks `condition` every `interval` until it holds and returns; throws `NotEventually` naming `what` (evaluated
/// only then, so it may describe what the test sees at that moment) when it still does not hold after `limit`.
/// An error the condition throws ends the wait at once.
public func eventually(
    _ what: @autoclosure () -> String, within limit: Duration, every interval: Duration = .milliseconds(100),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: min(interval, max(deadline - .now, .zero)))
    }
    if try await condition() { return }
    throw NotEventually(what: what(), limit: limit)
}

/// `waitUntil` was cancelled (the test's time limit) before its condition held.
public struct NeverHappened: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "cancelled (the test's time limit) while waiting until: \(what)" }
}

/// Checks `condition` every `interval` until it holds: for a state another process changes (a worker's metric, a
/// queue's depth, a log line) that only a poll can see. It has no deadline of its own, so a slow machine cannot fail
/// it: the test's time limit ends it, and it then throws `NeverHappened` naming `what` (evaluated then, so it may
/// describe what the test sees at that moment). Where how soon something happens is what a test checks, the test
/// measures it and expects on the measure, or uses `eventually`. An error the condition throws ends the wait at once.
public func waitUntil(
    _ what: @autoclosure () -> String, every interval: Duration = .milliseconds(100),
    _ condition: () async throws -> Bool
) async throws {
    while try await !condition() {
        do {
            try await Task.sleep(for: interval)
        } catch {
            throw NeverHappened(what: what())
        }
    }
}

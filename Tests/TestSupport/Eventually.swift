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

import Synchronization

/// The operator asked a walk of the dead-letter queue to stop (SIGINT or SIGTERM): `DeadLetterQueue` checks it
/// between two messages, so a run stops with nothing half done (no replay confirmed and still a dead letter, no
/// copy at the tail whose original is still in place) and its summary said.
public final class WalkInterruption: Sendable {
    private let requested = Atomic(false)

    public init() {}

    public func request() {
        requested.store(true, ordering: .relaxed)
    }

    public var isRequested: Bool { requested.load(ordering: .relaxed) }

    /// The closing line's words for it.
    public static let reason = "interrupted: every dead letter not yet reached is where it was"
}

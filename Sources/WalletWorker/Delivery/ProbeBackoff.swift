/// The waits before each try of something that failed for a dependency: a batch that failed for the store, the next
/// check of a store that is out, the next trial of paused results. Doubling from `first` up to `longest`, each drawn
/// uniformly from its upper half so replicas do not retry in step.
struct ProbeBackoff: Sendable, Hashable {
    /// Default: 500 ms (the store's; the results' trial starts at 5 s).
    var first: Duration = .milliseconds(500)
    /// Default: 30 s (the store's; the results' trial at 60 s).
    var longest: Duration = .seconds(30)

    /// The delay before try `attempt` (1-based).
    func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let doublings = min(max(attempt - 1, 0), 16)
        let ceiling = min(first * (1 << doublings), longest)
        let milliseconds = ceiling.milliseconds
        return .milliseconds(Int64.random(in: (milliseconds / 2)...milliseconds, using: &generator))
    }
}

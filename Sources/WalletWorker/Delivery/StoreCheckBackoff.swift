/// The waits between tries of a batch that failed for the store, and between checks of a store that is out:
/// doubling from `first` up to `longest`, each drawn uniformly from its upper half so replicas do not retry in step.
struct StoreCheckBackoff: Sendable, Hashable {
    /// Default: 500 ms.
    var first: Duration = .milliseconds(500)
    /// Default: 30 s.
    var longest: Duration = .seconds(30)

    /// The delay before try `attempt` (1-based).
    func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let doublings = min(max(attempt - 1, 0), 16)
        let ceiling = min(first * (1 << doublings), longest)
        let milliseconds = ceiling.milliseconds
        return .milliseconds(Int64.random(in: (milliseconds / 2)...milliseconds, using: &generator))
    }
}

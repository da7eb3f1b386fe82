import Synchronization

/// What the worker did with its deliveries around a stop, for the line that ends its log: whether it took any, and
/// how many it gave back to the broker (rather than finished) after the stop was asked for. Shared by every
/// pipeline's observer.
final class StopTally: Sendable {
    private struct Counts {
        var received = 0
        var givenBack = 0
        /// `givenBack` when the stop was asked for; nil before.
        var givenBackAtStop: Int?
    }

    private let counts = Mutex(Counts())

    func received(_ deliveries: Int) {
        counts.withLock { $0.received += deliveries }
    }

    /// A delivery left the worker without leaving its queue: requeued, or dropped with its session.
    func gaveBack(_ deliveries: Int) {
        counts.withLock { $0.givenBack += deliveries }
    }

    func stopRequested() {
        counts.withLock { counts in
            if counts.givenBackAtStop == nil { counts.givenBackAtStop = counts.givenBack }
        }
    }

    /// The worker's last line once every pipeline stopped: what a stop left behind, said as it is.
    var stoppedLine: String {
        counts.withLock { counts in
            guard counts.received > 0 else { return "stopped before taking any delivery" }
            let givenBack = counts.givenBack - (counts.givenBackAtStop ?? counts.givenBack)
            guard givenBack > 0 else { return "stopped: every batch in hand acknowledged" }
            return "stopped: \(givenBack) deliveries given back to the queue for the broker to deliver again, "
                + "the rest in hand acknowledged"
        }
    }
}

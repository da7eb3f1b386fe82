import AMQPTransport
import Synchronization

/// The batches of one session between their store transaction and their acknowledgement: what the poison guard
/// holds responsible when the session fails, and what a suspect waits for to be processed alone.
final class InFlightBatches: Sendable {
    /// By the batch's first delivery tag (unique within a session).
    private let batches = Mutex<[(tag: UInt64, deliveries: [AMQPDelivery])]>([])

    init() {}

    func begin(_ deliveries: [AMQPDelivery]) {
        guard let first = deliveries.first else { return }
        batches.withLock { $0.append((first.deliveryTag, deliveries)) }
    }

    func end(_ deliveries: [AMQPDelivery]) {
        guard let first = deliveries.first else { return }
        batches.withLock { $0.removeAll { $0.tag == first.deliveryTag } }
    }

    var all: [[AMQPDelivery]] { batches.withLock { $0.map(\.deliveries) } }

    /// Returns once nothing is in flight; throws when the task is cancelled (the session failed meanwhile).
    /// Polls: it runs only while suspects are processed, after a failure.
    func waitUntilEmpty() async throws {
        while !batches.withLock({ $0.isEmpty }) {
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

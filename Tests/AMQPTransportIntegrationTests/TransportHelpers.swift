import AMQPTransport
import BrokerTestSupport
import Locking

// The transport tests' own helpers; the broker connection, the per-test session and `within` are BrokerTestSupport's.

// MARK: - Observing, consuming and publishing in tests

/// Collects a connection's events from a background task.
final class EventRecorder: Sendable {
    private let events = Locked<[AMQPConnectionEvent]>([])

    var recorded: [AMQPConnectionEvent] { events.withLock { $0 } }

    /// Starts recording; the task ends when the connection's event stream finishes.
    func watch(_ connection: AMQPConnection) -> Task<Void, Never> {
        Task {
            for await event in connection.events {
                events.withLock { $0.append(event) }
            }
        }
    }
}

/// Reads batches until at least `count` deliveries arrived (or the sequence ended); returns them in order.
func receive(_ count: Int, from consumer: AMQPConsumer, within limit: Duration = .seconds(10)) async throws
    -> [AMQPDelivery]
{
    try await within(limit, "receiving \(count) deliveries from consumer \(consumer.tag)") {
        var deliveries: [AMQPDelivery] = []
        for try await batch in consumer {
            deliveries += batch
            if deliveries.count >= count { break }
        }
        return deliveries
    }
}

/// A message to a queue through the default exchange, with a text body.
func message(to queue: String, _ text: String, properties: AMQPMessageProperties = .init()) -> AMQPOutboundMessage {
    AMQPOutboundMessage(
        exchange: "", routingKey: queue, body: Array(text.utf8), properties: properties, mandatory: true)
}

extension AMQPDelivery {
    var text: String { String(decoding: body, as: UTF8.self) }
}

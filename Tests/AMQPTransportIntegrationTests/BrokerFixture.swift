import AMQPTransport
import Foundation
import Logging
import Synchronization
import Testing

// Where the integration tests find RabbitMQ, and the per-test session that owns what a test declares.
// CI provides the broker; locally `scripts/rabbitmq-local.sh start`. A missing broker fails every test
// with `BrokerUnreachable`: these tests never skip.

enum TestBroker {
    static let defaultURL = "amqp://guest:guest@127.0.0.1:5672/%2f"

    /// `AMQP_URL` from the environment, else the local node of `scripts/rabbitmq-local.sh`.
    static var urlText: String {
        ProcessInfo.processInfo.environment["AMQP_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultURL
    }

    /// Warnings and errors only: the transport logs every connection open and close at info.
    static let logger: Logger = {
        var logger = Logger(label: "amqp-integration-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// The configuration of a test connection, named so the management UI shows which test owns it.
    static func configuration(purpose: String) throws -> AMQPConnectionConfiguration {
        var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: urlText))
        configuration.connectionName = "integration-tests: \(purpose)"
        configuration.connectTimeout = .seconds(5)
        configuration.rpcTimeout = .seconds(10)
        return configuration
    }

    /// Connects to the test broker; any failure becomes `BrokerUnreachable`, which says how to provide one.
    static func connect(
        purpose: String, configure: (inout AMQPConnectionConfiguration) -> Void = { _ in }
    ) async throws -> AMQPConnection {
        var configuration = try configuration(purpose: purpose)
        configure(&configuration)
        do {
            return try await AMQPConnection.connect(configuration: configuration, logger: logger)
        } catch {
            throw BrokerUnreachable(url: configuration.url, underlying: error)
        }
    }
}

/// The test broker could not be reached: a failure, never a skip.
struct BrokerUnreachable: Error, CustomStringConvertible {
    var url: AMQPURL
    var underlying: AMQPError

    var description: String {
        "the integration tests need a running RabbitMQ at \(url) (AMQP_URL, default \(TestBroker.defaultURL)); "
            + "start one locally with `scripts/rabbitmq-local.sh start` (CI provides one). Connecting failed: \(underlying)"
    }
}

extension BrokerUnreachable {
    /// For tests that expect the broker to refuse something: a failure that means "no broker there" becomes
    /// `BrokerUnreachable` instead of a list of mismatched expectations.
    static func check(_ error: AMQPError, connecting url: AMQPURL) throws {
        if [.connectionFailed, .connectTimeout, .connectionLost].contains(error.code) {
            throw BrokerUnreachable(url: url, underlying: error)
        }
    }
}

/// A name no other test (or earlier run) uses: `wnw-it.<purpose>.<random>`.
func uniqueName(_ purpose: String) -> String {
    "wnw-it.\(purpose).\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
}

/// One test's connection and first channel, and the queues and exchanges it declared.
/// `withBrokerSession` deletes them when the test ends, whether it passed or not.
final class BrokerSession {
    let purpose: String
    let connection: AMQPConnection
    /// The session's first channel. A test that makes the broker close it opens another.
    let channel: AMQPChannel
    private var queues: [String] = []
    private var exchanges: [String] = []

    init(purpose: String, connection: AMQPConnection, channel: AMQPChannel) {
        self.purpose = purpose
        self.connection = connection
        self.channel = channel
    }

    /// Declares a uniquely named queue that is deleted at the end of the test.
    /// Non-durable by default: most tests do not need the disk.
    func declareOwnedQueue(
        _ purpose: String, durable: Bool = false, arguments: AMQPTable = [:]
    ) async throws -> String {
        let name = uniqueName(purpose)
        queues.append(name)
        try await channel.declareQueue(name, durable: durable, arguments: arguments)
        return name
    }

    /// Declares a uniquely named exchange that is deleted at the end of the test.
    func declareOwnedExchange(_ purpose: String, type: String = "direct") async throws -> String {
        let name = uniqueName(purpose)
        exchanges.append(name)
        try await channel.declareExchange(name, type: type, durable: false)
        return name
    }

    /// Registers a queue declared some other way (another channel, a test of declare itself) for deletion.
    func own(queue name: String) {
        queues.append(name)
    }

    /// Deletes what the test declared, on a fresh channel (the test may have got its channels closed),
    /// or on a fresh connection when the session's connection is gone. Deleting a missing queue or exchange is fine.
    fileprivate func deleteOwnedTopology() async throws {
        guard !queues.isEmpty || !exchanges.isEmpty else { return }
        var spare: AMQPConnection?
        let channel: AMQPChannel
        if let fresh = try? await connection.openChannel() {
            channel = fresh
        } else {
            let connection = try await TestBroker.connect(purpose: "\(purpose) (clean-up)")
            spare = connection
            channel = try await connection.openChannel()
        }
        for queue in queues { try await channel.deleteQueue(queue) }
        for exchange in exchanges { try await channel.deleteExchange(exchange) }
        try? await channel.close()
        await spare?.close()
    }
}

/// Runs `body` with a connected session; afterwards deletes the session's queues and exchanges and closes
/// the connection, also when `body` throws.
func withBrokerSession<T>(
    _ purpose: String,
    configure: (inout AMQPConnectionConfiguration) -> Void = { _ in },
    _ body: (BrokerSession) async throws -> T
) async throws -> T {
    let connection = try await TestBroker.connect(purpose: purpose, configure: configure)
    let session: BrokerSession
    do {
        session = BrokerSession(purpose: purpose, connection: connection, channel: try await connection.openChannel())
    } catch {
        await connection.close()
        throw error
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await body(session))
    } catch {
        result = .failure(error)
    }
    do {
        try await session.deleteOwnedTopology()
    } catch {
        Issue.record("could not delete the test's queues and exchanges: \(error)")
    }
    await connection.close()
    return try result.get()
}

// MARK: - Observing, consuming and publishing in tests

/// Collects a connection's events from a background task.
final class EventRecorder: Sendable {
    private let events = Mutex<[AMQPConnectionEvent]>([])

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
func receive(_ count: Int, from consumer: AMQPConsumer, within limit: Duration = .seconds(10)) async throws -> [AMQPDelivery] {
    try await within(limit, "receiving \(count) deliveries from consumer \(consumer.tag)") {
        var deliveries: [AMQPDelivery] = []
        for try await batch in consumer {
            deliveries += batch
            if deliveries.count >= count { break }
        }
        return deliveries
    }
}

/// Publishes with confirms and requires every message to be confirmed.
func publishConfirmed(
    _ messages: [AMQPOutboundMessage], on channel: AMQPChannel, sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let outcomes = try await within(.seconds(20), "confirms for \(messages.count) publishes") {
        try await channel.publish(messages, confirmTimeout: .seconds(15))
    }
    try #require(outcomes.count == messages.count, sourceLocation: sourceLocation)
    let unconfirmed = outcomes.enumerated().filter { !$0.element.isConfirmed }
    try #require(unconfirmed.isEmpty, "not confirmed (position, outcome): \(unconfirmed.prefix(5))", sourceLocation: sourceLocation)
}

/// A message to a queue through the default exchange, with a text body.
func message(to queue: String, _ text: String, properties: AMQPMessageProperties = .init()) -> AMQPOutboundMessage {
    AMQPOutboundMessage(exchange: "", routingKey: queue, body: Array(text.utf8), properties: properties, mandatory: true)
}

extension AMQPDelivery {
    var text: String { String(decoding: body, as: UTF8.self) }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

import AMQPTransport
import Foundation
import Logging

// The one place the integration tests open broker connections. CI provides the broker (scripts/test.sh starts a
// private one); locally `scripts/rabbitmq-local.sh start`. A missing broker fails every test with
// `BrokerUnreachable`: these tests never skip.

public enum TestBroker {
    public static let defaultURL = "amqp://guest:guest@127.0.0.1:5672/%2f"

    /// `AMQP_URL` from the environment, else the local node of `scripts/rabbitmq-local.sh`.
    public static var urlText: String { environment("AMQP_URL") ?? defaultURL }

    /// A non-empty environment variable (`AMQPS_URL`, `AMQP_SECOND_USER_URL`, ... as scripts/test.sh exports them).
    public static func environment(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Warnings and errors of the tests' own connections: the transport logs every open and close at info.
    public static let logger: Logger = {
        var logger = Logger(label: "broker-integration-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// The configuration of a test connection, named so the management UI shows which test owns it.
    public static func configuration(purpose: String, url: String = urlText) throws -> AMQPConnectionConfiguration {
        var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: url))
        configuration.connectionName = "integration-tests: \(purpose)"
        configuration.connectTimeout = .seconds(5)
        configuration.rpcTimeout = .seconds(15)
        return configuration
    }

    /// Connects to the test broker (or `url`); any failure becomes `BrokerUnreachable`, which says how to provide one.
    public static func connect(
        purpose: String, url: String = urlText, configure: (inout AMQPConnectionConfiguration) -> Void = { _ in }
    ) async throws -> AMQPConnection {
        var configuration = try configuration(purpose: purpose, url: url)
        configure(&configuration)
        do {
            return try await AMQPConnection.connect(configuration: configuration, logger: logger)
        } catch {
            throw BrokerUnreachable(url: "\(configuration.url)", underlying: "\(error)")
        }
    }

    /// Connects with a configuration the test built itself (a wrong password, a port with no broker, TLS): the
    /// transport's own error, for tests that expect one.
    public static func connect(configuration: AMQPConnectionConfiguration) async throws(AMQPError) -> AMQPConnection {
        try await AMQPConnection.connect(configuration: configuration, logger: logger)
    }

    /// The configuration of a connection to the test broker's TLS listener (`AMQPS_URL`, trusting `AMQP_TLS_CA_FILE`;
    /// scripts/test.sh exports both), optionally under another host name.
    public static func tlsConfiguration(purpose: String, host: String? = nil) throws -> AMQPConnectionConfiguration {
        guard let urlText = environment("AMQPS_URL"), let caFile = environment("AMQP_TLS_CA_FILE") else {
            throw BrokerTestError(
                "AMQPS_URL and AMQP_TLS_CA_FILE must point at the test broker's TLS listener (scripts/test.sh sets them)"
            )
        }
        var configuration = try configuration(purpose: purpose, url: urlText)
        if let host { configuration.url.host = host }
        configuration.tls.caCertificatePath = caFile
        return configuration
    }

    /// The repository's root (for scripts/ and README.md).
    public static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// The test broker could not be reached: a failure, never a skip.
public struct BrokerUnreachable: Error, CustomStringConvertible {
    public var url: String
    public var underlying: String

    public init(url: String, underlying: String) {
        self.url = url
        self.underlying = underlying
    }

    public var description: String {
        "the integration tests need a running RabbitMQ at \(url) (AMQP_URL, default \(TestBroker.defaultURL)); "
            + "start one locally with `scripts/rabbitmq-local.sh start` (scripts/test.sh and CI provide one). "
            + "Connecting failed: \(underlying)"
    }

    /// For tests that expect the broker to refuse something: a failure that means "no broker there" becomes
    /// `BrokerUnreachable` instead of a list of mismatched expectations.
    public static func check(_ error: AMQPError, connecting url: AMQPURL) throws {
        if [.connectionFailed, .connectTimeout, .connectionLost].contains(error.code) {
            throw BrokerUnreachable(url: "\(url)", underlying: "\(error)")
        }
    }
}

/// A test helper gave up: what it waited for and what it saw.
public struct BrokerTestError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Publishes with confirms, in chunks; throws unless every message is confirmed (routed, with `mandatory`).
public func publishConfirmed(
    _ messages: [AMQPOutboundMessage], on channel: AMQPChannel, chunk: Int = 1_000,
    confirmTimeout: Duration = .seconds(30)
) async throws {
    var offset = 0
    while offset < messages.count {
        let slice = Array(messages[offset..<min(offset + chunk, messages.count)])
        let outcomes = try await within(confirmTimeout + .seconds(5), "confirms for \(slice.count) publishes") {
            try await channel.publish(slice, confirmTimeout: confirmTimeout)
        }
        let failed = outcomes.enumerated().filter { !$0.element.isConfirmed }
        guard outcomes.count == slice.count, failed.isEmpty else {
            throw BrokerTestError(
                "\(failed.count) of \(slice.count) publishes not confirmed, \(outcomes.count) outcomes "
                    + "(position, outcome: \(failed.prefix(5).map { (offset + $0.offset, $0.element) })); "
                    + "is the destination declared and bound?")
        }
        offset += slice.count
    }
}

/// Messages ready in a queue (passive declare on a fresh channel; unacknowledged ones are not counted).
public func readyCount(_ queue: String, on connection: AMQPConnection) async throws -> Int {
    let channel = try await connection.openChannel()
    let status = try await channel.queueStatus(queue)
    try? await channel.close()
    return Int(status.messageCount)
}

extension Duration {
    /// The duration in seconds, for rates and printing.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

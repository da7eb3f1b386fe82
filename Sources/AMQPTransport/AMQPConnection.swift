import Logging

/// A connection to a RabbitMQ broker over librabbitmq.
///
/// All methods are safe to call from any task: they are executed in order on the connection's own
/// I/O thread. A connection that failed stays failed (every call throws its error): make a new one.
public final class AMQPConnection: Sendable {
    let runtime: ConnectionRuntime
    /// Broker notifications: blocked/unblocked and the final close. Finishes when the connection ends.
    public let events: AsyncStream<AMQPConnectionEvent>
    public let configuration: AMQPConnectionConfiguration
    /// The frame size the broker agreed to (at most `configuration.frameMax`): a message's content header must fit in
    /// one frame of it.
    public let frameMax: Int

    private init(
        runtime: ConnectionRuntime, events: AsyncStream<AMQPConnectionEvent>,
        configuration: AMQPConnectionConfiguration,
        frameMax: Int
    ) {
        self.runtime = runtime
        self.events = events
        self.configuration = configuration
        self.frameMax = frameMax
    }

    deinit {
        // A connection dropped without close() would keep its I/O thread (and the broker's resources) alive.
        _ = runtime.submit { core in core.close() }
    }

    /// Connects and logs in, within `configuration.connectTimeout` for the socket.
    public static func connect(
        configuration: AMQPConnectionConfiguration,
        logger: Logger = Logger(label: "amqp")
    ) async throws(AMQPError) -> AMQPConnection {
        let (events, continuation) = AsyncStream.makeStream(
            of: AMQPConnectionEvent.self, bufferingPolicy: .bufferingNewest(64))
        let (runtime, frameMax) = try await ConnectionRuntime.start(
            configuration: configuration, logger: logger, events: continuation)
        return AMQPConnection(runtime: runtime, events: events, configuration: configuration, frameMax: frameMax)
    }

    /// Opens a new channel.
    public func openChannel() async throws(AMQPError) -> AMQPChannel {
        let reference = try await runtime.perform { core throws(AMQPError) in try core.openChannel() }
        return AMQPChannel(reference: reference, connection: self)
    }

    /// Cancels consumers, closes channels and the connection, and stops the I/O thread.
    /// Deliveries not yet acknowledged are requeued by the broker.
    ///
    /// Bounded by `timeout`: if the I/O thread is stuck inside librabbitmq (a send into a socket the broker
    /// stopped reading), the socket is shut down under it so the call returns.
    public func close(timeout: Duration = .seconds(10)) async {
        let runtime = runtime
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            runtime.forceSocketShutdown()
        }
        _ = try? await runtime.perform { core throws(AMQPError) in core.close() }
        watchdog.cancel()
    }
}

import AMQPTransport

/// Where the dead letters are and how to reach them: all `DeadLetterQueue` needs of the workers' settings. The
/// executable makes it from the flags and variables of `run` (`wallet-worker dead-letters` takes the same), so the
/// tools know nothing of the worker's configuration.
public struct DeadLetterQueueAccess: Sendable {
    /// The settings of the tool's connections: the workers' (URL, TLS, heartbeat).
    public var connection: AMQPConnectionConfiguration
    /// The dead-letter queue's name.
    public var queue: String
    /// Declares the queue as the workers do: true when it has its loop (`DeadLetterLoop`), false when it exists as
    /// an earlier version declared it, without one. Throws what the broker refused, said for an operator.
    public var declare: @Sendable (AMQPConnection) async throws -> Bool

    public init(
        connection: AMQPConnectionConfiguration, queue: String,
        declare: @escaping @Sendable (AMQPConnection) async throws -> Bool
    ) {
        self.connection = connection
        self.queue = queue
        self.declare = declare
    }
}

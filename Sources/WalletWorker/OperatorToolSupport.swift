import AMQPTransport

/// The worker's header names, public for the operator tools (`WalletOperatorTools`: the dead-letter tool reads
/// and strips them). The worker's own code keeps using `WorkerHeaders` and `XDeathHeader`; these only forward.
public enum WorkerHeaderNames {
    /// Why the worker dead-lettered a message.
    public static let workerError = WorkerHeaders.workerError
    /// Failed processing attempts so far (retry copies).
    public static let retryCount = WorkerHeaders.retryCount
    /// The `expiration` of a retried or dead-lettered message, moved aside.
    public static let originalExpiration = WorkerHeaders.originalExpiration
    /// The `user_id` of a retried or dead-lettered message, moved aside.
    public static let originalUserID = WorkerHeaders.originalUserID
    /// Headers a dead letter left out to fit a frame, with their sizes.
    public static let droppedHeaders = WorkerHeaders.droppedHeaders
    /// The size of a body a dead letter lacks (the worker did not read it).
    public static let omittedBodyBytes = WorkerHeaders.omittedBodyBytes
    /// W3C trace context.
    public static let traceparent = WorkerHeaders.traceparent
    /// RabbitMQ's dead-lettering record.
    public static let xDeath = XDeathHeader.name
    /// Where a retry copy keeps an `x-death` the broker could not update.
    public static let xDeathKeptAs = XDeathHeader.keptAs

    /// Whether RabbitMQ 3.x can dead-letter a message with these headers without crashing the queue (see
    /// `XDeathHeader`).
    public static func brokerCanUpdateXDeath(_ headers: AMQPTable?) -> Bool {
        XDeathHeader.brokerCanUpdate(headers)
    }
}

extension WorkerConfiguration {
    /// The transport's settings for a connection of the operator tools: the same as the worker's.
    public func toolConnectionConfiguration() throws -> AMQPConnectionConfiguration {
        try connectionConfiguration()
    }
}

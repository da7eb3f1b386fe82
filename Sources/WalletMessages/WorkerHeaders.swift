/// Header names the worker reads and writes on inbound messages (and the operator tools read and strip).
public enum WorkerHeaders {
    /// W3C trace context, copied onto every result (CONTRACT.md §2).
    public static let traceparent = "traceparent"
    /// Failed processing attempts so far, set on the copy sent to the retry queue.
    public static let retryCount = "x-retry-count"
    /// The error of the last failed attempt, on the retry copy.
    public static let lastError = "x-worker-last-error"
    /// Why the worker dead-lettered a message (CONTRACT.md §8).
    public static let workerError = "x-worker-error"
    /// The `expiration` of a dead-lettered message: the dead letter itself carries none, as when RabbitMQ
    /// dead-letters (it keeps the value in `x-death`'s `original-expiration`), so it cannot expire out of the
    /// dead-letter queue.
    public static let originalExpiration = "x-original-expiration"
    /// The `user_id` of a retried or dead-lettered message: the copy cannot carry it (see `OriginalMessage.copy`).
    public static let originalUserID = "x-original-user-id"
    /// The original's headers a dead letter leaves out because the copy would not fit a frame, with their sizes.
    public static let droppedHeaders = "x-worker-dropped-headers"
    /// The size of a body the worker did not read, on a dead letter without it: written by versions before the
    /// transport read such bodies whole (`XDeathHeader.bodyMustBeKept`); dead letters in a queue may still carry it.
    public static let omittedBodyBytes = "x-worker-omitted-body-bytes"
}

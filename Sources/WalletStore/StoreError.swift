/// A store failure. The worker retries transient ones through the retry queue (CONTRACT.md §8), dead-letters the
/// message a store refuses (`refusedInput`), and treats permanent ones (a schema it cannot migrate, a corrupt file)
/// as fatal.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// Busy, locked, unreachable, out of space, timed out: worth trying again later.
        case transient
        /// Will fail again the same way: a corrupt database, a schema from a newer version, a bad location.
        case permanent
        /// The store cannot hold data of this batch's messages (a NUL character in a text value, an id longer than
        /// an index allows): the same message fails again every time, while the store itself is fine. The worker
        /// finds the message by storing the batch's messages one at a time and dead-letters it alone.
        case refusedInput
    }

    public var kind: Kind
    /// A transient failure of the store as a whole, not of the batch that met it: the server is unreachable,
    /// read-only or out of space, the SQLite file is locked by another process, full or read-only. The worker holds its
    /// batches until the store answers instead of retrying them through the queue.
    public var isOutage: Bool
    /// What failed, for logs and the `x-worker-error` header of a message dead-lettered after its last retry.
    public var message: String
    public var file: String
    public var line: Int

    public var isTransient: Bool { kind == .transient }

    public init(_ kind: Kind, _ message: String, outage: Bool = false, file: String = #fileID, line: Int = #line) {
        self.kind = kind
        self.isOutage = outage && kind == .transient
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String {
        switch kind {
        case .transient: "store unavailable: \(message)"
        case .permanent: "store failed: \(message)"
        case .refusedInput: "store refused the input: \(message)"
        }
    }
}

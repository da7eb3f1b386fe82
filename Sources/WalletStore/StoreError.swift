/// A store failure. The worker retries transient ones through the retry queue (CONTRACT.md §8) and treats
/// permanent ones (a schema it cannot migrate, a corrupt file) as fatal at start-up.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// Busy, locked, unreachable, out of space, timed out: worth trying again later.
        case transient
        /// Will fail again the same way: a corrupt database, a schema from a newer version, a bad location.
        case permanent
    }

    public var kind: Kind
    /// What failed, for logs and the `x-worker-error` header of a message dead-lettered after its last retry.
    public var message: String
    public var file: String
    public var line: Int

    public var isTransient: Bool { kind == .transient }

    public init(_ kind: Kind, _ message: String, file: String = #fileID, line: Int = #line) {
        self.kind = kind
        self.message = message
        self.file = file
        self.line = line
    }

    public var description: String { "store \(kind == .transient ? "unavailable" : "failed"): \(message)" }
}

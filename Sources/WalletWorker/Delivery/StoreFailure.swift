import WalletStore

/// A store failure that retrying cannot fix and no single message explains (a corrupt database, a schema newer
/// than this build, credentials that stopped working): the worker finishes what it has committed, stops taking
/// work and exits with it, so the messages stay in the queue for a fixed deployment.
public struct StoreFailure: Error, Sendable, CustomStringConvertible {
    public var underlying: StoreError
    public var description: String { "\(underlying)" }

    public init(_ underlying: StoreError) {
        self.underlying = underlying
    }
}

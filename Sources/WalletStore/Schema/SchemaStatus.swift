/// Which of this build's schema migrations a store has, and which it has that this build does not know.
///
/// `wallet-worker migrate` prints it; `run --no-migrate` refuses to start unless it `isCurrent`.
public struct SchemaStatus: Sendable, Hashable, CustomStringConvertible {
    /// The migrations recorded in the store, in the order they were applied (empty for a store never migrated).
    public var applied: [String]
    /// The migrations this build knows, in order.
    public var known: [String]

    public init(applied: [String], known: [String]) {
        self.applied = applied
        self.known = known
    }

    /// This build's migrations the store lacks: `migrate` would apply them.
    public var pending: [String] { known.filter { !applied.contains($0) } }
    /// Migrations of a newer build: this build must not use the store.
    public var unknown: [String] { applied.filter { !known.contains($0) } }
    public var isCurrent: Bool { pending.isEmpty && unknown.isEmpty }

    public var description: String {
        if !unknown.isEmpty {
            return "newer than this build (unknown migrations: \(unknown.joined(separator: ", ")))"
        }
        if applied.isEmpty {
            return "none (this build's migrations: \(known.joined(separator: ", ")))"
        }
        if !pending.isEmpty {
            return "behind this build (applied: \(applied.joined(separator: ", ")); "
                + "missing: \(pending.joined(separator: ", ")))"
        }
        return "current (\(applied.joined(separator: ", ")))"
    }
}

/// What a store does with its schema when it opens.
public enum SchemaMode: Sendable, Hashable {
    /// Applies the migrations it lacks (the default: one command starts a worker on a new store).
    case migrate
    /// Changes nothing and refuses a store whose schema is not exactly this build's (`run --no-migrate`, for a
    /// database user without DDL rights; a deploy job runs `wallet-worker migrate`).
    case requireCurrent
}

extension SchemaStatus {
    /// The error `requireCurrent` raises for a store that is not current, naming the command that fixes it.
    func requireCurrentError(store: String, location: String) -> StoreError {
        if !unknown.isEmpty {
            return StoreError(
                .permanent, "\(store) schema is \(self): run a newer worker")
        }
        return StoreError(
            .permanent,
            "\(store) schema is \(self), and this command changes no schema: run "
                + "`wallet-worker migrate --store \(location)` with this build first")
    }
}

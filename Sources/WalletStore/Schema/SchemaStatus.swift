/// Which of this build's schema migrations a store has, and which it has that this build does not know.
///
/// `wallet-worker migrate` prints it; `run --no-migrate` refuses to start unless it `isCurrent`.
public struct SchemaStatus: Sendable, Hashable, CustomStringConvertible {
    /// The migrations recorded in the store, in the order they were applied (empty for a store never migrated).
    public var applied: [String]
    /// The migrations this build knows, in order.
    public var known: [String]
    /// This build's migrations it runs without: index builds (reads are slower without them, results the same), which
    /// `wallet-worker migrate` applies and a worker's start does not (on a store with data); retirements of what
    /// older builds read (PostgreSQL's v6), which only `wallet-worker migrate --retire-older-builds` applies to a
    /// store with data; storage settings (PostgreSQL's v4), which both apply.
    public var optional: [String]
    /// Migrations of a newer build that declare this build's schema compatible (an index, a storage setting): this
    /// build runs on the store as it is (a rollback, an old replica during a rolling update).
    public var compatibleUnknown: [String]
    /// This build's optional migrations that retire what older builds read (PostgreSQL's v6): applied to a store
    /// with data only by `wallet-worker migrate --retire-older-builds`.
    public var retirements: [String]

    public init(
        applied: [String], known: [String], optional: [String] = [], compatibleUnknown: [String] = [],
        retirements: [String] = []
    ) {
        self.applied = applied
        self.known = known
        self.optional = optional
        self.compatibleUnknown = compatibleUnknown
        self.retirements = retirements
    }

    /// This build's migrations the store lacks: `migrate` would apply them.
    public var pending: [String] { known.filter { !applied.contains($0) } }
    /// Pending migrations this build cannot run without.
    public var pendingRequired: [String] { pending.filter { !optional.contains($0) } }
    /// Migrations of a newer build.
    public var unknown: [String] { applied.filter { !known.contains($0) } }
    /// Migrations of a newer build that this build must not run with.
    public var incompatibleUnknown: [String] { unknown.filter { !compatibleUnknown.contains($0) } }
    /// Exactly this build's schema (`migrate --check`).
    public var isCurrent: Bool { pending.isEmpty && unknown.isEmpty }
    /// This build can run on the store as it is: every migration it needs, nothing of a newer build it cannot
    /// read (`run --no-migrate`, `inspect`).
    public var isUsable: Bool { pendingRequired.isEmpty && incompatibleUnknown.isEmpty }

    public var description: String {
        if !incompatibleUnknown.isEmpty {
            return "newer than this build (unknown migrations: \(unknown.joined(separator: ", ")))"
        }
        if !unknown.isEmpty {
            return "newer than this build, compatible with it (applied: \(applied.joined(separator: ", ")); "
                + "\(unknown.joined(separator: ", ")) change nothing it reads or writes)"
        }
        if applied.isEmpty {
            return "none (this build's migrations: \(known.joined(separator: ", ")))"
        }
        if !pendingRequired.isEmpty {
            return "behind this build (applied: \(applied.joined(separator: ", ")); "
                + "missing: \(pending.joined(separator: ", ")))"
        }
        if !pending.isEmpty {
            let retiring = pending.filter { retirements.contains($0) }
            let retire =
                "once every replica runs this build or a newer one, run `wallet-worker migrate --retire-older-builds`"
            let command =
                retiring.isEmpty
                ? "run `wallet-worker migrate`"
                : retiring.count == pending.count
                    ? retire : "run `wallet-worker migrate`, then for \(retiring.joined(separator: ", ")), \(retire)"
            return "usable, optional migrations pending (applied: \(applied.joined(separator: ", ")); "
                + "missing: \(pending.joined(separator: ", ")): \(command))"
        }
        return "current (\(applied.joined(separator: ", ")))"
    }
}

/// What a store does with its schema when it opens.
public enum SchemaMode: Sendable, Hashable {
    /// Applies every migration it lacks, index builds included (`wallet-worker migrate`, the migrate Job).
    case migrate
    /// Applies the table changes it lacks, and index builds only on a new store (a worker's start: one command
    /// starts a worker on a new store, and an index build on a populated table never holds a start or the
    /// writes). Then as `requireCurrent`.
    case migrateWithoutIndexBuilds
    /// Changes nothing and refuses a store this build cannot run on (`run --no-migrate`, for a database user
    /// without DDL rights; a deploy job runs `wallet-worker migrate`): a migration it needs is missing, or a newer
    /// build applied one that is not compatible with it.
    case requireCurrent
}

extension SchemaStatus {
    /// The error `requireCurrent` raises for a store that is not current, naming the command that fixes it.
    func requireCurrentError(store: String, location: String) -> StoreError {
        if !incompatibleUnknown.isEmpty {
            return StoreError(
                .permanent, "\(store) schema is \(self): run a newer worker")
        }
        return StoreError(
            .permanent,
            "\(store) schema is \(self), and this command changes no schema: run "
                + "`wallet-worker migrate --store \(location)` with this build first")
    }
}

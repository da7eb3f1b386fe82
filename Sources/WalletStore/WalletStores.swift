/// Opens the store a `StoreLocation` names: the one entry point the worker and the CLI use.
public enum WalletStores {
    /// - Parameters:
    ///   - busyTimeout: how long a SQLite write waits for another connection's lock (SQLite only).
    ///     Default: `.seconds(5)`.
    ///   - poolSize: connections to PostgreSQL this process opens at most (PostgreSQL only). Default: `4`.
    ///   - statementTimeout: longest a PostgreSQL statement may run, lock waits included (PostgreSQL only).
    ///     Default: `.seconds(5)`.
    ///   - schemaMode: migrate the schema, or require this build's and change nothing (`run --no-migrate`).
    ///     The SQLite store applies it at open, the PostgreSQL store in `prepare()`. Default: `.migrate`.
    public static func open(
        _ location: StoreLocation, busyTimeout: Duration = .seconds(5), poolSize: Int = 4,
        statementTimeout: Duration = .seconds(5), schemaMode: SchemaMode = .migrate
    ) throws(StoreError) -> any WalletStore {
        switch location {
        case .memory:
            return InMemoryWalletStore()
        case .sqlite(let path):
            var configuration = SQLiteWalletStore.Configuration(path: path)
            configuration.busyTimeout = busyTimeout
            configuration.schemaMode = schemaMode
            return try SQLiteWalletStore(configuration: configuration)
        case .postgres(let postgres):
            var configuration = PostgresWalletStore.Configuration(location: postgres)
            configuration.poolSize = poolSize
            configuration.statementTimeout = statementTimeout
            configuration.schemaMode = schemaMode
            return try PostgresWalletStore(configuration: configuration)
        }
    }

    /// The store's schema, read without changing anything (a missing SQLite file has none).
    /// - Throws: a permanent `StoreError` for the memory store, which has no schema.
    public static func schemaStatus(_ location: StoreLocation, statementTimeout: Duration = .seconds(5))
        async throws(StoreError) -> SchemaStatus
    {
        switch location {
        case .memory:
            throw StoreError(.permanent, "the memory store has no schema")
        case .sqlite(let path):
            return try SQLiteWalletStore.schemaStatus(path: path)
        case .postgres(let postgres):
            var configuration = PostgresWalletStore.Configuration(location: postgres)
            configuration.poolSize = 1
            configuration.statementTimeout = statementTimeout
            let store = try PostgresWalletStore(configuration: configuration)
            do {
                let status = try await store.schemaStatus()
                await store.close()
                return status
            } catch {
                await store.close()
                throw error
            }
        }
    }

    /// Applies the migrations the store lacks (creating a missing SQLite file), as a start with `.migrate` would;
    /// returns the schema before and after. A schema newer than this build is refused and left as it is.
    /// - Parameter retiringOlderBuilds: also apply the migrations that retire what older builds read (PostgreSQL's
    ///   v6), which make those builds refuse the store: only once no replica of such a build runs
    ///   (`migrate --retire-older-builds`). They are applied to a new store anyway.
    public static func migrate(
        _ location: StoreLocation, statementTimeout: Duration = .seconds(5), retiringOlderBuilds: Bool = false
    ) async throws(StoreError) -> (before: SchemaStatus, after: SchemaStatus) {
        let before = try await schemaStatus(location, statementTimeout: statementTimeout)
        let store: any WalletStore
        if case .postgres(let postgres) = location {
            var configuration = PostgresWalletStore.Configuration(location: postgres)
            configuration.poolSize = 1
            configuration.statementTimeout = statementTimeout
            configuration.retiresOlderBuilds = retiringOlderBuilds
            store = try PostgresWalletStore(configuration: configuration)
        } else {
            store = try open(location, poolSize: 1, statementTimeout: statementTimeout, schemaMode: .migrate)
        }
        do {
            try await store.prepare()
        } catch {
            await store.close()
            throw error
        }
        await store.close()
        return (before, try await schemaStatus(location, statementTimeout: statementTimeout))
    }
}

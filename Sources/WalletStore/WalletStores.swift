/// Opens the store a `StoreLocation` names: the one entry point the worker and the CLI use.
public enum WalletStores {
    /// - Parameters:
    ///   - busyTimeout: how long a SQLite write waits for another connection's lock (SQLite only).
    ///     Default: `.seconds(5)`.
    ///   - poolSize: connections to PostgreSQL this process opens at most (PostgreSQL only). Default: `4`.
    ///   - statementTimeout: longest a PostgreSQL statement may run, lock waits included (PostgreSQL only).
    ///     Default: `.seconds(5)`.
    public static func open(
        _ location: StoreLocation, busyTimeout: Duration = .seconds(5), poolSize: Int = 4,
        statementTimeout: Duration = .seconds(5)
    ) throws(StoreError) -> any WalletStore {
        switch location {
        case .memory:
            return InMemoryWalletStore()
        case .sqlite(let path):
            var configuration = SQLiteWalletStore.Configuration(path: path)
            configuration.busyTimeout = busyTimeout
            return try SQLiteWalletStore(configuration: configuration)
        case .postgres(let postgres):
            var configuration = PostgresWalletStore.Configuration(location: postgres)
            configuration.poolSize = poolSize
            configuration.statementTimeout = statementTimeout
            return try PostgresWalletStore(configuration: configuration)
        }
    }
}

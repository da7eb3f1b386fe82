/// Opens the store a `StoreLocation` names: the one entry point the worker and the CLI use.
public enum WalletStores {
    /// - Parameter busyTimeout: how long a SQLite write waits for another connection's lock (ignored in memory).
    ///   Default: `.seconds(5)`.
    public static func open(_ location: StoreLocation, busyTimeout: Duration = .seconds(5)) throws(StoreError)
        -> any WalletStore
    {
        switch location {
        case .memory:
            return InMemoryWalletStore()
        case .sqlite(let path):
            var configuration = SQLiteWalletStore.Configuration(path: path)
            configuration.busyTimeout = busyTimeout
            return try SQLiteWalletStore(configuration: configuration)
        }
    }
}

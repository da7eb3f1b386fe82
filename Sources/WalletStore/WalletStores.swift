// TEMPORARY (replaced by the store branch)
public enum WalletStores {
    public static func open(_ location: StoreLocation, busyTimeout: Duration = .seconds(5)) throws(StoreError) -> any WalletStore {
        InMemoryWalletStore()
    }
}

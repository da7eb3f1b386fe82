extension SQLiteWalletStore {
    /// A read transaction on the file. It does not take the write lock: a lock held by another process shows as
    /// the batch's own failure (the file is local; its outages are a full disk or a misplaced file).
    public func checkAvailable() async throws(StoreError) {
        _ = try await read { _ in true }
    }
}

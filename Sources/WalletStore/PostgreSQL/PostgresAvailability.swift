import PostgresNIO

extension PostgresWalletStore {
    /// `SELECT 1` on a pooled connection, within the store's deadlines.
    public func checkAvailable() async throws(StoreError) {
        _ = try await read { statements in
            try await statements.connection.query("SELECT 1", logger: statements.logger)
        }
    }
}

import PostgresNIO

extension PostgresWalletStore {
    /// Proves the server takes a batch's writes, within the store's deadlines, and keeps nothing: one row written in
    /// a transaction that is rolled back. `SELECT 1` passes on a standby answering as the primary after a failover
    /// (read-only, SQLSTATE 25006), and the worker would then retry its batches to the dead letters instead of holding
    /// them (`DeliveryLifecycle`). A full disk shows only when WAL is flushed: the batch's own failure says so (53100,
    /// `StoreError.isOutage`).
    public func checkAvailable() async throws(StoreError) {
        let id = Self.storeCheckMessageID
        try await read { statements in
            try await statements.begin()
            do {
                // With a value for `results`, as every record of this build (schema v6 refuses one without).
                try await statements.connection.query(
                    """
                    INSERT INTO processed_messages (message_id, recorded_at, outcome, results)
                    VALUES (\(id), now(), 'store-check', '\\x0100'::bytea)
                    """,
                    logger: statements.logger)
            } catch {
                // As a batch does: no ROLLBACK on a broken connection, and none handed back inside a transaction.
                if Self.isConnectionBroken(by: error) {
                    try? await statements.connection.close()
                } else if (try? await statements.rollback()) == nil {
                    try? await statements.connection.close()
                }
                throw error
            }
            try await statements.rollback()
        }
    }

    /// Not a message id anyone sends (it starts with a control character); rolled back anyway.
    static let storeCheckMessageID = "\u{1}wallet-worker store check"
}

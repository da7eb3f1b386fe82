import GRDB

extension SQLiteWalletStore {
    /// Proves the file takes a batch's writes, and keeps nothing: an IMMEDIATE transaction (the write lock, within the
    /// busy timeout), one row written, rolled back. A read would pass while another process holds the write lock or
    /// the file became read-only, and the worker would then retry its batches to the dead letters instead of
    /// holding them (`DeliveryLifecycle`). A full disk shows only at commit: the batch's own failure says so
    /// (`StoreError.isOutage`).
    public func checkAvailable() async throws(StoreError) {
        try await writeAndRollBack { db in
            try db.execute(
                sql:
                    "INSERT INTO processed_messages (message_id, recorded_at, outcome, results) VALUES (?, 0, 'store-check', X'')",
                arguments: [Self.storeCheckMessageID])
        }
    }

    /// Not a message id anyone sends (it starts with a control character); rolled back anyway.
    static let storeCheckMessageID = "\u{1}wallet-worker store check"
}

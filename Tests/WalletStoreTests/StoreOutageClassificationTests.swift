import GRDB
import Testing

@testable import WalletStore

/// Which store errors are an outage of the store as a whole (the worker holds its batches until a write passes
/// again, and dead-letters nothing meanwhile) and which are one batch's trouble (retried, in the end through the
/// retry queue): issue 23's defect 3 was a disk-full or read-only store taken for the batch's fault.
@Suite struct StoreOutageClassificationTests {
    @Test(arguments: [
        // A standby answering as the primary after a failover; out of disk, memory or connections.
        ("25006", true), ("53100", true), ("53200", true), ("53300", true), ("53400", true),
        // Shutting down, crashed, not accepting connections yet; the connection or the system failed.
        ("57P01", true), ("57P02", true), ("57P03", true), ("08006", true), ("08001", true), ("58030", true),
        // One batch's trouble: its rows, its locks, its time.
        ("40001", false), ("40P01", false), ("23505", false), ("57014", false), ("55P03", false),
        ("25P03", false), ("22021", false), ("42501", false), ("XX000", false),
    ])
    func postgresSQLStates(state: String, isOutage: Bool) {
        #expect(PostgresSQLState.isOutage(state) == isOutage)
    }

    /// PgBouncer refuses start-up parameters it does not know (the worker's session settings) with 08P01, a
    /// connection exception: not an outage to wait out, the same answer until the deployment changes.
    @Test func aPoolerRefusingTheSessionSettingsIsPermanent() {
        let refused = StoreError.server(
            state: "08P01", message: "unsupported startup parameter: statement_timeout", place: "(db)")
        #expect(refused.kind == .permanent && !refused.isOutage, "\(refused)")
        #expect(refused.message.contains("session settings") && refused.message.contains("statement_timeout"))
        let other = StoreError.server(state: "08P01", message: "invalid frame length", place: "(db)")
        #expect(other.isTransient && other.isOutage, "\(other)")
    }

    @Test(arguments: [
        // Another process holds the write lock; the disk is full or failing; the file became read-only or
        // unreachable.
        (ResultCode.SQLITE_BUSY, true), (.SQLITE_LOCKED, true), (.SQLITE_IOERR, true), (.SQLITE_FULL, true),
        (.SQLITE_PROTOCOL, true), (.SQLITE_CANTOPEN, true), (.SQLITE_READONLY, true),
        // The batch's own: interrupted, a value too big, a constraint; or the file itself is damaged (permanent).
        (.SQLITE_INTERRUPT, false), (.SQLITE_TOOBIG, false), (.SQLITE_CONSTRAINT, false), (.SQLITE_CORRUPT, false),
        (.SQLITE_NOTADB, false),
    ])
    func sqliteResultCodesWhileProcessing(code: ResultCode, isOutage: Bool) {
        let error = StoreError.sqlite(DatabaseError(resultCode: code), phase: .processing, fileName: "/x.sqlite")
        #expect(error.isOutage == isOutage, "\(error)")
    }

    @Test(arguments: [ResultCode.SQLITE_BUSY, .SQLITE_FULL, .SQLITE_READONLY, .SQLITE_CANTOPEN])
    func atStartUpNothingIsAnOutage(code: ResultCode) {
        // Opening the file: a misconfiguration or a wait at start-up, not live traffic to hold.
        let error = StoreError.sqlite(DatabaseError(resultCode: code), phase: .opening, fileName: "/x.sqlite")
        #expect(!error.isOutage, "\(error)")
    }
}

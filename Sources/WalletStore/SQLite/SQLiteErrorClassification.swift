import Foundation
import GRDB

/// Where a SQLite failure happened: the same result code can mean different things at open and at process time.
enum SQLitePhase: Sendable {
    /// Opening, configuring and migrating the file (start-up).
    case opening
    /// Processing a batch, expiring processed ids.
    case processing
}

extension StoreError {
    /// Classifies any error from a SQLite access, in one place (CONTRACT.md §8: transient failures are retried
    /// through the retry queue, permanent ones are fatal at start-up or dead-letter after the last attempt).
    ///
    /// The message names the failure, SQLite's explanation and the file, never the SQL arguments (they may hold a
    /// push token): it ends up in log lines and in `x-worker-error` headers.
    static func sqlite(_ error: any Error, phase: SQLitePhase, fileName: String) -> StoreError {
        switch error {
        case let error as StoreError:
            return error
        case let error as DatabaseError:
            let (kind, label) = classify(error.resultCode, phase: phase)
            let explanation = error.message ?? "\(error.extendedResultCode)"
            return StoreError(
                kind, "SQLite \(label): \(explanation) (\(fileName))",
                outage: phase == .processing && isOutage(error.resultCode))
        case is CancellationError:
            // The caller gave up (shutdown): the batch rolled back and is worth processing again.
            return StoreError(.transient, "SQLite access cancelled (\(fileName))")
        default:
            // Not `\(error)`: GRDB's decoding errors print the row and the arguments, which may hold a push token.
            return StoreError(.permanent, "SQLite store failed: unexpected \(type(of: error)) (\(fileName))")
        }
    }

    /// Failures of the file as a whole, whatever the batch: another process holds the write lock, the disk is full or
    /// failing, the file became read-only or unreachable. The worker holds its batches until a write passes again.
    private static func isOutage(_ code: ResultCode) -> Bool {
        switch code {
        case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_IOERR, .SQLITE_FULL, .SQLITE_PROTOCOL, .SQLITE_CANTOPEN,
            .SQLITE_READONLY:
            true
        default:
            false
        }
    }

    private static func classify(_ code: ResultCode, phase: SQLitePhase) -> (StoreError.Kind, String) {
        switch code {
        // Another process holds the file, or the machine is short of something: the next attempt may succeed.
        case .SQLITE_BUSY: (.transient, "busy")
        case .SQLITE_LOCKED: (.transient, "locked")
        case .SQLITE_IOERR: (.transient, "I/O error")
        case .SQLITE_FULL: (.transient, "disk full")
        case .SQLITE_PROTOCOL: (.transient, "locking protocol error")
        case .SQLITE_INTERRUPT: (.transient, "interrupted")
        // At start-up a file that cannot be opened is a bad path or permissions: retrying will not help.
        // Later (e.g. the -wal file vanished with its directory briefly unreachable) it is worth a retry.
        case .SQLITE_CANTOPEN: (phase == .opening ? .permanent : .transient, "cannot open")
        // The same failure every time: a damaged file, another format, a file we may not write, a bad row.
        case .SQLITE_CORRUPT: (.permanent, "corrupt")
        case .SQLITE_NOTADB: (.permanent, "not a database")
        // At start-up a read-only file is a misconfiguration; later it was remounted or its mode changed under the
        // worker, which an operator fixes: the worker waits for it.
        case .SQLITE_READONLY: (phase == .opening ? .permanent : .transient, "read-only")
        case .SQLITE_CONSTRAINT: (.permanent, "constraint violated")
        case .SQLITE_SCHEMA: (.permanent, "schema changed")
        // A value over SQLite's length limit: this message's data, not the file.
        case .SQLITE_TOOBIG: (.refusedInput, "value too big")
        default: (.permanent, "error \(code.rawValue)")
        }
    }
}

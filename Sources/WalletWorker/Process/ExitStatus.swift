import AMQPTransport
import WalletStore

/// The exit statuses of every command of `wallet-worker` and `wallet-notify`: one table, in each command's
/// `--help` and in the README ("Exit statuses").
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// Done: `run` stopped by SIGTERM or SIGINT after draining; the entry found; everything replayed, purged,
    /// declared, migrated, routed or published.
    case success = 0
    /// The command ran and the answer is no: not found (`inspect`; `dead-letters` when no dead letter matched),
    /// the schema is not this build's (`migrate --check`), some replays or publishes were not confirmed, purge not confirmed, an input line that
    /// is not a message (`route`); or the broker or the store refused what the settings ask of it once connected
    /// (a topology that exists with other arguments, 406; no configure permission, 403; a store schema this build
    /// cannot use) or something else stopped the worker for good (the operations endpoint's port taken, a
    /// corrupt store).
    case failure = 1
    /// The broker or the store cannot be used with these settings: it refused the login or the vhost (403
    /// ACCESS_REFUSED, 530 NOT_ALLOWED), its TLS certificate did not verify, it cannot be reached (one-shot
    /// commands; `run` waits for an unreachable broker or store instead), the database or the SQLite file does not
    /// exist or cannot be opened, PostgreSQL refused the login, or a pooler in front of it drops the session
    /// settings the store needs.
    case unavailable = 2
    /// Usage: an unknown flag or subcommand, a value that does not parse or is out of range, a `_FILE` that cannot
    /// be read, an `OTEL_*` setting this build cannot honour (BSD's EX_USAGE, as swift-argument-parser exits for a
    /// validation error).
    case usage = 64
    /// Interrupted (SIGINT or SIGTERM) before it was done, as a shell reports a process SIGINT ended: a
    /// `dead-letters` command stops between two messages and prints its closing line first. (`run` drains and
    /// exits 0 instead: a stop is its normal end.)
    case interrupted = 130

    /// The table as `--help` prints it.
    public static let helpText = """
        Exit status: 0 done; 1 not found, refused or failed (the answer is no: nothing found, a schema that is \
        not this build's, replays not confirmed, a topology the broker refuses, a fatal store error); 2 the broker \
        or the store cannot be used with these settings (login or vhost refused, TLS not verified, unreachable, \
        no such database or file); 64 usage (a flag or value that does not parse or is out of range); 130 \
        interrupted before it was done (dead-letters after its closing line; run drains and exits 0).
        """

    /// The status a failure ends a command with: unavailable for a refused login, a TLS failure, an unreachable
    /// broker and a store that cannot be opened or logged into; failure for the rest.
    public static func of(_ error: any Error) -> ExitStatus {
        switch error {
        case is BrokerLogin.Refused:
            return .unavailable
        case let error as AMQPError:
            switch error.code {
            case .authenticationFailed, .tlsFailed, .connectionFailed, .connectTimeout: return .unavailable
            default: return .failure
            }
        case let error as StoreFailure:
            return of(error.underlying)
        case let error as StoreError:
            return error.isUnavailable ? .unavailable : .failure
        default:
            return .failure
        }
    }
}

extension StoreError {
    /// A store that cannot be used with these settings at all (as opposed to one that can be reached and refuses
    /// what is asked of it): unreachable, a refused login, no such database, a file that cannot be opened, a
    /// pooler that drops the session settings.
    public var isUnavailable: Bool {
        if isTransient { return true }
        let reasons = [
            "authentication failed", "database does not exist", "does not exist", "cannot open", "unreachable",
            "session settings",
        ]
        return kind == .permanent && reasons.contains { message.contains($0) }
    }
}

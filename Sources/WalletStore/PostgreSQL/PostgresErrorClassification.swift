import NIOCore
import PostgresNIO

/// A failure that another transaction's concurrent work caused: the batch is retried inside the store (a fresh
/// transaction sees the other's commit) before it surfaces as a transient `StoreError`.
struct PostgresConflict: Error, CustomStringConvertible {
    var description: String
}

extension StoreError {
    /// Classifies any error of a PostgreSQL access, in one place. Transient: the server is unreachable, restarting,
    /// full or overloaded, a statement timed out, or another transaction got in the way. Refused input: the server
    /// cannot hold a value of the batch (SQLSTATE classes 22 and 54). Permanent: the same failure every time
    /// (credentials, a missing database, a schema this build does not know).
    ///
    /// The message names the failure, SQLSTATE and the server's primary message, never a password or the SQL
    /// arguments (they may hold a push token): it ends up in logs and `x-worker-error` headers.
    static func postgres(_ error: any Error, at location: PostgresLocation) -> StoreError {
        let place = "(\(location.shortName))"
        switch error {
        case let error as StoreError:
            return error
        case let conflict as PostgresConflict:
            return StoreError(.transient, "PostgreSQL conflict: \(conflict.description) \(place)")
        case let error as PSQLError:
            return psql(error, place: place)
        case is PostgresDecodingError:
            // Not `\(error)`: it prints the column's bytes.
            return StoreError(.permanent, "PostgreSQL store holds a value this build cannot read \(place)")
        case is CancellationError:
            return StoreError(.transient, "PostgreSQL access cancelled \(place)")
        case let error as IOError:
            return StoreError(.transient, "PostgreSQL unreachable: \(error.description) \(place)", outage: true)
        case let error as ChannelError:
            return StoreError(.transient, "PostgreSQL connection failed: \(error) \(place)", outage: true)
        default:
            // NIO's connect errors (refused, DNS) and other transport failures: the network, worth a retry.
            return StoreError(.transient, "PostgreSQL connection failed: \(type(of: error)) \(place)", outage: true)
        }
    }

    /// PostgreSQL refused the login (SQLSTATE 28000, 28P01, or an authentication method the client cannot do).
    var isLoginRefusal: Bool {
        message.hasPrefix("PostgreSQL authentication failed")
    }

    /// Whether the store should roll back and run the batch again at once, in a fresh transaction.
    static func isConflict(_ error: any Error) -> Bool {
        if error is PostgresConflict { return true }
        guard let error = error as? PSQLError, error.code == .server,
            let state = error.serverInfo?[.sqlState]
        else { return false }
        return PostgresSQLState.conflicts.contains(state)
    }

    private static func psql(_ error: PSQLError, place: String) -> StoreError {
        switch error.code {
        case .server:
            return server(
                state: error.serverInfo?[.sqlState] ?? "?????", message: error.serverInfo?[.message] ?? "no message",
                place: place)
        case .serverClosedConnection, .uncleanShutdown:
            return StoreError(.transient, "PostgreSQL connection lost \(place)", outage: true)
        case .clientClosedConnection:
            return StoreError(.transient, "PostgreSQL connection closed (no answer in time) \(place)", outage: true)
        case .connectionError:
            let cause = error.underlying.map { underlyingDescription($0) } ?? "unknown cause"
            return StoreError(.transient, "PostgreSQL unreachable: \(cause) \(place)", outage: true)
        case .queryCancelled:
            return StoreError(.transient, "PostgreSQL query cancelled \(place)")
        case .poolClosed:
            return StoreError(.permanent, "PostgreSQL store is closed \(place)")
        case .sslUnsupported:
            return StoreError(.permanent, "PostgreSQL server does not offer TLS, which sslmode requires \(place)")
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return StoreError(.permanent, "PostgreSQL authentication failed: \(error.code) \(place)")
        default:
            return StoreError(.transient, "PostgreSQL protocol error: \(error.code) \(place)")
        }
    }

    /// An error the server (or a pooler in front of it) answered with: its SQLSTATE and primary message.
    static func server(state: String, message: String, place: String) -> StoreError {
        // PgBouncer's answer to the session settings the worker sends at start-up (08P01, which would otherwise be
        // retried for ever as an outage): the same every time until the deployment changes.
        if message.hasPrefix("unsupported startup parameter") {
            return StoreError(
                .permanent,
                """
                PostgreSQL connection refused the worker's session settings (SQLSTATE \(state)): \(message): a \
                pooler that does not pass start-up parameters on (PgBouncer)? Connect to the server directly \
                (docs/operations.md) \(place)
                """)
        }
        let (kind, label) = PostgresSQLState.classify(state)
        return StoreError(
            kind, "PostgreSQL \(label) (SQLSTATE \(state)): \(message) \(place)",
            outage: PostgresSQLState.isOutage(state))
    }

    /// The transport's own words (NIO's connect, DNS and socket errors name the address and errno, nothing secret).
    private static func underlyingDescription(_ error: any Error) -> String {
        "\(error)"
    }
}

/// SQLSTATE codes (PostgreSQL's appendix A) and what they mean for the worker.
enum PostgresSQLState {
    /// Another transaction won a race: serialization failure, deadlock, unique violation (a processed
    /// `message_id` or a new card recorded by another replica first).
    static let conflicts: Set<String> = ["40001", "40P01", "23505"]

    /// The server as a whole cannot take the batch's writes, whatever the batch: it is read-only (a standby answering
    /// as the primary after a failover, 25006), out of disk, memory or connections (class 53), shutting down or
    /// restarting (57P01-57P03), or its connection or system failed (classes 08 and 58). Not a statement timeout, a
    /// lock wait or a conflict: those can be one batch's rows.
    static func isOutage(_ state: String) -> Bool {
        if state == "25006" || ["57P01", "57P02", "57P03"].contains(state) { return true }
        return ["08", "53", "58"].contains(state.prefix(2))
    }

    static func classify(_ state: String) -> (StoreError.Kind, String) {
        switch state {
        case "40001": (.transient, "serialization failure")
        case "40P01": (.transient, "deadlock")
        case "23505": (.transient, "unique violation")
        case "57014": (.transient, "statement timeout")
        case "55P03": (.transient, "lock not available")
        case "25P03": (.transient, "idle transaction timeout")
        // A standby answering as the primary (a DNS name still pointing at it after a failover).
        case "25006": (.transient, "read-only transaction")
        case "53300": (.transient, "too many connections")
        case "57P01": (.transient, "server shutting down")
        case "57P02": (.transient, "server crashed")
        case "57P03": (.transient, "server not accepting connections yet")
        case "28000", "28P01": (.permanent, "authentication failed")
        case "3D000": (.permanent, "database does not exist")
        case "3F000": (.permanent, "schema does not exist")
        case "42P01": (.permanent, "undefined table")
        case "42703": (.permanent, "undefined column")
        case "42501": (.permanent, "insufficient privilege")
        default:
            switch state.prefix(2) {
            // Connection exceptions, insufficient resources (disk full, out of memory), operator intervention,
            // system errors (I/O): the server or the machine, not the request.
            case "08", "53", "57", "58": (.transient, "server unavailable")
            case "40": (.transient, "transaction rolled back")
            // Data exceptions (a NUL character in text or jsonb: 22021, 22P05) and program limits (an id longer
            // than a btree index row: 54000): this batch's data, not the server. The worker isolates the message.
            case "22": (.refusedInput, "data exception")
            case "54": (.refusedInput, "program limit exceeded")
            default: (.permanent, "error")
            }
        }
    }
}

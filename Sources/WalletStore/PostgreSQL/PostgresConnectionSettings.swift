import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// What every connection of a PostgreSQL store is opened with, pooled or not.
struct PostgresConnectionSettings: Sendable {
    let location: PostgresLocation
    let statementTimeout: Duration
    /// Sessions in which the server refuses every write (`wallet-worker inspect`).
    var readOnly = false

    init(_ configuration: PostgresWalletStore.Configuration) {
        location = configuration.location
        statementTimeout = configuration.statementTimeout
    }

    /// Sent at start-up, so every connection has them before its first statement.
    var startupParameters: [(String, String)] {
        let milliseconds = max(1, statementTimeout.wholeMilliseconds)
        var parameters = [
            ("application_name", "wallet-worker"),
            ("statement_timeout", "\(milliseconds)"),
            // A replica frozen inside a transaction (stopped, partitioned) would hold its row locks for ever: the
            // server ends such a session and the other replicas go on.
            ("idle_in_transaction_session_timeout", "\(max(30_000, 2 * milliseconds))"),
            // The batch statements are prepared and, after a few calls, planned once for the connection's life
            // (`PreparedBatchStatement`). Each reads or writes by key: with sequential scans priced out, the plan
            // kept is an index plan even when it was made while a table was empty. A statement with no index to use
            // still scans.
            ("enable_seqscan", "off"),
        ]
        if let schema = location.schema {
            parameters.append(("search_path", schema))
        }
        if readOnly {
            parameters.append(("default_transaction_read_only", "on"))
        }
        return parameters
    }

    var connectTimeout: Duration { max(statementTimeout, .seconds(1)) }

    /// Migrating may wait for another replica's migration (the advisory lock) and builds tables: it is not held to
    /// the batches' statement timeout, only to a bound that still ends a start-up against a server that hangs.
    var migrationTimeout: Duration { max(statementTimeout * 4, .seconds(30)) }

    var clientTLS: PostgresClient.Configuration.TLS {
        switch location.tlsMode {
        case .disable: .disable
        case .prefer: .prefer(tlsConfiguration)
        case .require, .verifyFull: .require(tlsConfiguration)
        }
    }

    /// libpq's meanings: `prefer` and `require` encrypt without verifying the certificate, `verify-full` verifies
    /// it and the host name.
    private var tlsConfiguration: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch location.tlsMode {
        case .verifyFull:
            if let path = location.tlsRootCertificatePath { tls.trustRoots = .file(path) }
        case .disable, .prefer, .require:
            tls.certificateVerification = .none
        }
        return tls
    }

    /// A connection outside the pool: for migrations, and to learn why the pool cannot connect (the pool only
    /// says that it could not).
    func connect(logger: Logger) async throws -> PostgresConnection {
        let tls: PostgresConnection.Configuration.TLS
        do {
            switch location.tlsMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: tlsConfiguration))
            case .require, .verifyFull: tls = .require(try NIOSSLContext(configuration: tlsConfiguration))
            }
        } catch {
            throw StoreError(
                .permanent, "PostgreSQL TLS set-up failed (sslrootcert?): \(error) (\(location.shortName))")
        }
        var configuration = PostgresConnection.Configuration(
            host: location.host, port: location.port, username: location.user, password: location.password,
            database: location.database, tls: tls)
        configuration.options.connectTimeout = .milliseconds(connectTimeout.wholeMilliseconds)
        configuration.options.additionalStartupParameters = startupParameters
        return try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
    }
}

extension Duration {
    /// Whole milliseconds (rounded down).
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

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
            // With the newest schema version this build knows: a retirement waits for older builds' sessions to
            // go (`PostgresSchema.olderBuildSessions`).
            ("application_name", PostgresSchema.applicationName),
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

    /// The start-up parameters the store depends on: all but the application name, which only labels the session.
    var requiredSettings: [(String, String)] { startupParameters.filter { $0.0 != "application_name" } }

    /// Throws unless the session on `connection` has every `requiredSettings` value. Sent at start-up, they can
    /// only be lost on the way: a pooler between the worker and the server that does not pass start-up parameters
    /// on (PgBouncer drops them with `ignore_startup_parameters`, and refuses the connection without it). Without
    /// them a batch waits for ever on a lock, a replica frozen in a transaction holds its locks, a prepared
    /// statement can keep a whole-table scan, and the tables are looked for outside the configured schema.
    func checkSessionSettings(on connection: PostgresConnection, logger: Logger) async throws {
        let required = requiredSettings
        var reported: [String: String] = [:]
        for try await (name, setting) in try await connection.query(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(\(required.map(\.0)))", logger: logger
        ).decode((String, String).self) {
            reported[name] = setting
        }
        let lost = Self.lostSettings(required: required, reported: reported)
        guard lost.isEmpty else {
            let described = lost.map { "\($0.name) is \($0.reported.map { "'\($0)'" } ?? "unknown"), not '\($0.sent)'" }
            // Never the read-only setting of `inspect`'s sessions: on the role it would stop the worker's writes.
            let role = "\"" + location.user.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let roleSettings = required.filter { $0.0 != "default_transaction_read_only" }
                .map { "ALTER ROLE \(role) SET \($0.0) = '\($0.1)';" }.joined(separator: " ")
            throw StoreError(
                .permanent,
                """
                PostgreSQL session settings were lost on the way to the server (\(described.joined(separator: "; "))): \
                a pooler that drops start-up parameters (PgBouncer's ignore_startup_parameters)? Connect to the server \
                directly, or give the worker's role the same settings (\(roleSettings) docs/operations.md) \
                (\(location.shortName))
                """)
        }
    }

    /// The required settings the server reports otherwise (`reported`: `pg_settings.setting` by name; a setting
    /// the server does not know is absent).
    static func lostSettings(required: [(String, String)], reported: [String: String])
        -> [(name: String, sent: String, reported: String?)]
    {
        required.compactMap { name, sent in
            reported[name] == sent ? nil : (name, sent, reported[name])
        }
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

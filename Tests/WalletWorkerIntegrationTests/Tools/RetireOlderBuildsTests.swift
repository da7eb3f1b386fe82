import Foundation
import PostgresNIO
import Testing

extension Resilience {
    /// Issue 38: PostgreSQL's v6 retires the result rows older builds read, only on the operator's word. Through the
    /// real `wallet-worker migrate`: the manual undo the store's design describes brings a database back to v5,
    /// `--check` then names the flag, `--retire-older-builds` says no (exit 1) while a session named as an older
    /// build's is connected, and applies v6 once it has gone.
    @Suite("migrate --retire-older-builds", .timeLimit(.minutes(2)))
    struct RetireOlderBuilds {
        @Test("refused with an older build connected, applied once it has gone, and v6 can be undone by hand")
        func retirementWaitsForTheOperatorAndTheOlderBuilds() async throws {
            guard ReplicaDatabase.isConfigured else {
                Issue.record("POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it")
                return
            }
            try await ReplicaDatabase.with("retire") { database in
                let store = database.storeURL
                let created = try await walletWorkerCommand(["migrate", "--store", store])
                #expect(created.exit == .exited(0) && created.output.contains("v6"), "\(created.output)")
                // docs/design/store.md, "Results in one value": undoing v6 by hand.
                try await database.withConnection { connection in
                    try await connection.query(
                        "ALTER TABLE processed_messages DROP CONSTRAINT processed_messages_results_recorded",
                        logger: ReplicaDatabase.logger)
                    try await connection.query(
                        "DELETE FROM wallet_schema_migrations WHERE version = 6", logger: ReplicaDatabase.logger)
                }
                let pending = try await walletWorkerCommand(["migrate", "--check", "--store", store])
                #expect(
                    pending.exit == .exited(1) && pending.output.contains("missing: v6")
                        && pending.output.contains("--retire-older-builds"), "\(pending.output)")
                let plain = try await walletWorkerCommand(["migrate", "--store", store])
                #expect(plain.exit == .exited(0) && plain.output.contains("nothing to apply"), "\(plain.output)")

                try await database.withConnection { olderReplica in
                    try await olderReplica.query(
                        "SET application_name = 'wallet-worker'", logger: ReplicaDatabase.logger)
                    let refused = try await walletWorkerCommand(["migrate", "--retire-older-builds", "--store", store])
                    #expect(
                        refused.exit == .exited(1) && refused.output.contains("missing: v6"), "\(refused.output)")
                }
                // Its backend leaves pg_stat_activity a moment after the client has closed.
                while try await database.withConnection({ connection in
                    var older = 0
                    for try await _ in try await connection.query(
                        """
                        SELECT 1 FROM pg_stat_activity
                        WHERE application_name = 'wallet-worker' AND datname = current_database()
                        """,
                        logger: ReplicaDatabase.logger)
                    {
                        older += 1
                    }
                    return older
                }) > 0 {
                    try await Task.sleep(for: .milliseconds(10))
                }
                let retired = try await walletWorkerCommand(["migrate", "--retire-older-builds", "--store", store])
                #expect(
                    retired.exit == .exited(0) && retired.output.contains("applied v6")
                        && retired.output.contains("schema current"), "\(retired.output)")
                let current = try await walletWorkerCommand(["migrate", "--check", "--store", store])
                #expect(current.exit == .exited(0), "\(current.output)")
            }
        }
    }
}

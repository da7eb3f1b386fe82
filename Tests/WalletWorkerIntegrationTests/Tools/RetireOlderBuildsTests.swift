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
                #expect(created.exit == .exited(0) && created.output.contains("v7"), "\(created.output)")
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
                    // The older replica goes. Its name goes first, seen by the next transaction on the server: a
                    // closed client's backend leaves pg_stat_activity only some time after the close returns.
                    try await olderReplica.query("SET application_name = 'gone'", logger: ReplicaDatabase.logger)
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

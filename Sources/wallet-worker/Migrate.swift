import ArgumentParser
import WalletOperatorTools
import WalletStore
import WalletWorker

extension WalletWorkerCommand {
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Apply the store's schema migrations, then exit (for deploy jobs; `run --no-migrate` needs them).",
            discussion: """
                Prints the schema before and after. Safe to run again, and while workers run: a migration is one \
                transaction (PostgreSQL: under an advisory lock, so replicas and jobs queue). A schema newer than \
                this build is refused and left as it is. With --check, changes nothing: exits 0 when the schema is \
                exactly this build's, 1 when it is missing, behind or newer. PostgreSQL: a migration may take 4 times \
                --store-statement-timeout, at least 30s. A migration that retires what older builds read (PostgreSQL's \
                v6: results kept as one value per message only; v7: that value compressed) makes builds before it \
                refuse the store, so on a store with data it is applied only with --retire-older-builds, once every \
                replica runs this build or a newer one (it is refused while a session of an older build is \
                connected).

                \(ExitStatus.helpText)
                """)

        @OptionGroup var options: StoreToolOptions
        @Flag(help: "Only report the schema; change nothing; exit 1 unless it is this build's")
        var check = false
        @Flag(
            help: """
                Also retire what builds older than this one read (PostgreSQL's v6 and v7): run once no replica of an \
                older build runs; they refuse the store afterwards
                """)
        var retireOlderBuilds = false

        func run() async throws {
            let location = try options.location
            let timeout = try options.statementTimeout
            try options.logging.bootstrap(redactingStore: location)
            do {
                if check {
                    let status = try await WalletStores.schemaStatus(location, statementTimeout: timeout)
                    _ = try printLine("\(location): schema \(status)")
                    if !status.isCurrent { throw ExitCode.failure }
                } else {
                    let (before, after) = try await WalletStores.migrate(
                        location, statementTimeout: timeout, retiringOlderBuilds: retireOlderBuilds)
                    let applied = after.applied.filter { !before.applied.contains($0) }
                    let what = applied.isEmpty ? "nothing to apply" : "applied \(applied.joined(separator: ", "))"
                    _ = try printLine("\(location): \(what); schema \(after)")
                    // Asked for and not done (a session of an older build was seen): the answer is no.
                    if retireOlderBuilds, after.pending.contains(where: after.retirements.contains) {
                        throw ExitCode.failure
                    }
                }
            } catch let error as StoreError {
                progressLine("wallet-worker migrate: \(error)")
                throw ExitCode(ExitStatus.of(error).rawValue)
            }
        }
    }
}

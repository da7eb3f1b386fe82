import ArgumentParser
import Foundation
import WalletOperatorTools
import WalletRouting
import WalletStore
import WalletWorker

extension WalletWorkerCommand {
    struct Route: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Route JSON lines from stdin without a broker and print what the worker would publish.",
            discussion: """
                Each input line: {"properties": {"messageId": "m1", "type": ..., "replyTo": ...}, "body": {...}} \
                ("bodyText" for a raw string, "bodyBase64" for raw bytes). Each output line: the disposition, \
                the outcome, whether the message_id was a replay, and the results with exchange, routing key, \
                properties and body. Exits 1 when an input line could not be read.

                Against a worker's store (sqlite:PATH or postgres://...) nothing is written unless --commit is \
                given: each line is routed against the store as it is and rolled back (no row is locked in \
                PostgreSQL), so later lines do not see earlier lines' effects. The store must exist with this \
                build's schema. With the default memory store, lines build on each other and nothing outlives \
                the command. A dry run against a SQLite file reads a snapshot of it: it never waits for the \
                worker's write lock.

                Exits 1 when an input line is not a message (it says so on its output line), 2 when the store \
                cannot be opened or read.

                \(ExitStatus.helpText)
                """)

        @Option(
            name: .customLong(Setting.store.name),
            help: .init(
                Setting.store.setting.help(
                    summary: "Store: memory, or sqlite:PATH or postgres://... to route against a worker's state",
                    default: StoreLocation.memory.description)))
        var store: String?
        @Flag(
            help:
                """
                Write each line's effects to the store and record its message_id, as the worker would (sqlite \
                or postgres; migrates the schema)
                """
        )
        var commit = false
        @Option(help: "Processing time for every line, ISO 8601 (e.g. 2026-11-21T08:00:00Z). Default: the clock")
        var now: String?
        @OptionGroup var routing: RoutingOptions
        @OptionGroup var logging: ToolLoggingOptions

        func run() async throws {
            var configuration = WorkerConfiguration()
            try routing.apply(to: &configuration)
            let location = try setting(self.store, Setting.store) ?? .memory
            configuration.store = location
            try logging.bootstrap(redacting: configuration)
            let commits = commit || location == .memory
            let store: any WalletStore
            do {
                store = try WalletStores.open(location, schemaMode: commits ? .migrate : .requireCurrent)
                do {
                    try await store.prepare()
                } catch {
                    await store.close()
                    throw error
                }
            } catch let error as StoreError {
                progressLine("wallet-worker route: \(error)")
                throw ExitCode(ExitStatus.unavailable.rawValue)
            }
            if !commits {
                progressLine("route: dry run against \(location): nothing is written (--commit writes)")
            }
            var fixedNow: Date?
            if let now {
                guard let date = try? Date(now, strategy: .iso8601) else {
                    throw ValidationError("--now \"\(now)\": expected an ISO 8601 time like 2026-11-21T08:00:00Z")
                }
                fixedNow = date
            }
            let lines = RouteLines(
                store: store, router: NotificationRouter(settings: configuration.routing), now: fixedNow,
                commits: commits)
            var number = 0
            var failed = false
            var storeFailed = false
            while let line = readLine(strippingNewline: true) {
                number += 1
                if line.allSatisfy(\.isWhitespace) { continue }
                let (output, lineFailed, lineStoreFailed) = await lines.route(line: Array(line.utf8), number: number)
                failed = failed || lineFailed
                storeFailed = storeFailed || lineStoreFailed
                let shown: Bool
                do {
                    shown = try StandardOutput.write(output + [UInt8(ascii: "\n")])
                } catch {
                    await store.close()
                    throw error
                }
                // The reader went away (`| head`): nothing more can be shown, which is not a failure.
                guard shown else { break }
            }
            await store.close()
            if storeFailed {
                progressLine("wallet-worker route: the store could not be read for some lines (see their \"error\")")
                throw ExitCode(ExitStatus.unavailable.rawValue)
            }
            if failed { throw ExitCode(ExitStatus.failure.rawValue) }
        }
    }
}

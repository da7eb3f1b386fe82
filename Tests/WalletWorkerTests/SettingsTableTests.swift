import Foundation
import Testing

@testable import WalletWorker

/// Issue 26: one table of settings. Its names are unique, its defaults are `WorkerConfiguration`'s (they parse back
/// to them), its Markdown is a well-formed table, its JSON holds every setting, and `validate()` reports its ranges
/// with the words it always used.
@Suite("Settings table")
struct SettingsTableTests {
    @Test("flags and variables are unique, and every variable is a shell name")
    func uniqueNames() {
        let flags = Setting.all.compactMap(\.flagName)
        let variables = Setting.all.map(\.variable)
        #expect(Set(flags).count == flags.count, "a flag twice: \(flags.sorted())")
        #expect(Set(variables).count == variables.count, "a variable twice: \(variables.sorted())")
        for setting in Setting.all {
            #expect(setting.variable.allSatisfy { $0.isUppercase || $0.isNumber || $0 == "_" }, "\(setting.variable)")
            if let name = setting.name {
                #expect(name.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" }, "\(name)")
            }
            #expect((setting.name == nil) == (setting.kind == .environment), "\(setting.variable)")
        }
        #expect(flags.count > 40)
    }

    @Test("a group's settings are next to each other, and its first one gives the row's meaning")
    func groupsAreRows() {
        let rows = Setting.rows()
        let groups = rows.compactMap { $0[0].group }
        #expect(Set(groups).count == groups.count, "a group split over rows: \(groups)")
        for row in rows where row.count > 1 {
            #expect(!row[0].meaning.isEmpty, "the group \(row[0].group ?? "") has no meaning")
        }
        #expect(rows.count < Setting.all.count)
    }

    /// Each default, written as the README shows it, parses back to `WorkerConfiguration()`'s value: the table
    /// copies no default by hand.
    /// The table's defaults are the configuration's: each, applied as if given, changes nothing (the TLS files
    /// have none to give, and the longest retry delay is then given rather than computed).
    @Test("each default, applied to WorkerConfiguration(), changes nothing")
    func defaultsAreTheConfigurations() throws {
        #expect(Setting.configurable.count > 40)
        for entry in Setting.configurable {
            guard let text = entry.setting.defaultValue else {
                #expect(entry.setting.group == "TLS files", "\(entry.setting.variable) has no default")
                continue
            }
            var configuration = WorkerConfiguration()
            try entry.apply(text, to: &configuration)
            var expected = WorkerConfiguration()
            if entry.setting == Setting.retryDelayMax.setting {
                expected.longestRetryDelay = WorkerConfiguration.defaultLongestRetryDelay
            }
            #expect(Self.dumped(configuration) == Self.dumped(expected), "\(entry.setting.variable)=\(text)")
        }
    }

    @Test("each setting is applied where the configuration holds it")
    func appliedWhereHeld() throws {
        var configuration = WorkerConfiguration()
        try Setting.noDeclare.apply("true", to: &configuration)
        try Setting.historyWindow.apply("2h", to: &configuration)
        try Setting.tlsCAFile.apply("/ca.pem", to: &configuration)
        try Setting.retryDelayMax.apply("1m", to: &configuration)
        try Setting.httpPort.apply("off", to: &configuration)
        try Setting.installationsExchange.apply("x.installations", to: &configuration)
        try Setting.store.apply("memory", to: &configuration)
        #expect(!configuration.declaresTopology)
        #expect(configuration.routing.transactionHistoryWindowSeconds == 7_200)
        #expect(configuration.tls.caCertificatePath == "/ca.pem")
        #expect(configuration.longestRetryDelay == .seconds(60))
        #expect(configuration.httpPort == nil)
        #expect(configuration.topology.resultExchanges.installations == "x.installations")
        #expect(configuration.store.description == "memory")
    }

    @Test("a store that does not parse is refused with the reason, never the text (it may hold a password)")
    func storeErrorHidesTheText() {
        var configuration = WorkerConfiguration()
        do {
            try Setting.store.apply("postgres://wallet:pg-secret-9@host/wallet?sslmode=maybe", to: &configuration)
            Issue.record("no error")
        } catch {
            #expect(error.description.hasPrefix("--store: "), "\(error)")
            #expect(!error.description.contains("pg-secret-9"), "\(error)")
        }
    }

    @Test("the Markdown is one table: a header, a separator and rows of four cells, no blank line")
    func markdownIsWellFormed() {
        let markdown = Setting.markdownTable()
        #expect(markdown.hasSuffix("|\n"))
        let lines = markdown.dropLast().split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first.map(String.init) == Setting.markdownHeader)
        #expect(lines.dropFirst().first == "|---|---|---|---|")
        #expect(lines.count == Setting.rows().count + 2)
        for line in lines {
            // Four cells: five unescaped bars, one at each end.
            let bars = line.enumerated().filter { index, character in
                character == "|" && (index == 0 || line[line.index(line.startIndex, offsetBy: index - 1)] != "\\")
            }
            #expect(bars.count == 5, "not four cells: \(line)")
            #expect(line.hasPrefix("| ") || line.hasPrefix("|---"), "\(line)")
        }
        for setting in Setting.all {
            #expect(markdown.contains("`\(setting.variable)`"), "\(setting.variable) is not in the table")
            if let flag = setting.flagName {
                #expect(markdown.contains("`\(flag)`"), "\(flag) is not in the table")
            }
        }
        // Backticks come in pairs in every cell (an unclosed one would swallow the rest of the row).
        for line in lines {
            for cell in line.split(separator: "|") {
                #expect(cell.filter { $0 == "`" }.count % 2 == 0, "unbalanced backticks: \(cell)")
            }
        }
    }

    @Test("the JSON is an array with every setting, its variable, default and meaning")
    func jsonHoldsEverySetting() throws {
        let data = Data(Setting.json().utf8)
        let entries = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        #expect(entries.count == Setting.all.count)
        #expect(entries.map { $0["variable"] as? String } == Setting.all.map(\.variable))
        for (entry, setting) in zip(entries, Setting.all) {
            let keys = [
                "flag", "variable", "kind", "default", "defaultText", "expected", "range", "help", "meaning", "group",
            ]
            for key in keys {
                #expect(entry.keys.contains(key), "\(setting.variable) has no \(key)")
            }
            #expect(entry["flag"] as? String == setting.flagName)
            #expect(
                setting.kind == .environment || !(entry["meaning"] as? String ?? "").isEmpty
                    || setting.variable == "WALLET_DEAD_LETTER_QUEUE", "\(setting.variable) has no meaning")
        }
        let byVariable = Dictionary(uniqueKeysWithValues: entries.map { ($0["variable"] as! String, $0) })
        #expect(byVariable["WALLET_STORE_STATEMENT_TIMEOUT"]?["default"] as? String == "5s")
        #expect(byVariable["WALLET_DELIVERY_LIMIT"]?["default"] as? String == "20")
        #expect(byVariable["WALLET_WORK_QUEUE"]?["default"] as? String == "wallet.notifications.work")
        #expect(byVariable["WALLET_ORDERED_SHARDS"]?["range"] as? String == "between 0 (off) and 64")
        // A member of a group carries its row's meaning.
        #expect(byVariable["AMQP_TLS_KEY_FILE"]?["meaning"] as? String == Setting.tlsCAFile.meaning)
    }

    @Test("the help names the variable and the default once")
    func helpHasTheSuffix() {
        #expect(
            Setting.storeStatementTimeout.help == """
                PostgreSQL statement timeout, lock waits included, e.g. 5s (env WALLET_STORE_STATEMENT_TIMEOUT). \
                Default: 5s
                """)
        #expect(Setting.tlsCAFile.help == "CA certificate file for amqps:// (env AMQP_TLS_CA_FILE).")
        #expect(Setting.noDeclare.help.hasSuffix("(env WALLET_NO_DECLARE=true)"))
        #expect(Setting.retryDelayMax.help.hasSuffix("Default: 5m (or --retry-delay if longer)"))
        #expect(
            Setting.logLevel.help
                == "trace, debug, info, notice, warning, error or critical (env LOG_LEVEL). Default: info")
        #expect(Setting.consumerTimeout.expected == "a duration like 30m, from 2s to 87600h")
        #expect(Setting.heartbeat.expected == "a duration like 10s, from 0 to 87600h")
        #expect(Setting.orderedShards.expected == "an integer from 0 (off) to 64")
        for setting in Setting.all where setting.kind != .environment {
            let suffix = setting.help.components(separatedBy: "(env ").last ?? ""
            #expect(!suffix.contains("`"), "Markdown in --help: \(setting.help)")
            #expect(setting.help.components(separatedBy: "(env ").count == 2, "\(setting.help)")
        }
    }

    @Test("a range checked when parsed refuses what is out of it")
    func rangesCheckedWhenParsed() {
        #expect(Setting.orderedShards.parse("64") == 64)
        #expect(Setting.orderedShards.parse("65") == nil)
        #expect(Setting.orderedShards.parse("-1") == nil)
        #expect(Setting.consumerTimeout.parse("2s") == .seconds(2))
        #expect(Setting.consumerTimeout.parse("1999ms") == nil)
        #expect(Setting.httpPort.parse("off") == .some(nil))
        #expect(Setting.httpPort.parse("8080") == .some(8080))
        #expect(Setting.queuePollInterval.parse("0s") == nil)
        #expect(Setting.queueType.parse("quorum") == .quorum)
        #expect(Setting.queueType.parse("Quorum") == nil)
        #expect(Setting.logLevel.parse("DEBUG") == .debug)
    }

    @Test("validate() reports the table's ranges as it always did")
    func validateUsesTheRanges() {
        let cases: [(change: (inout WorkerConfiguration) -> Void, message: String)] = [
            ({ $0.prefetch = 0 }, "--prefetch must be at least 1"),
            ({ $0.concurrency = 65 }, "--concurrency must be between 1 and 64"),
            ({ $0.concurrency = 0 }, "--concurrency must be between 1 and 64"),
            ({ $0.retryAttempts = 0 }, "--retry-attempts must be at least 1"),
            ({ $0.retryDelay = .zero }, "--retry-delay must be between 1 ms and 24 h"),
            ({ $0.retryDelay = .seconds(86_401) }, "--retry-delay must be between 1 ms and 24 h"),
            ({ $0.longestRetryDelay = .seconds(1) }, "--retry-delay-max must be between --retry-delay and 24 h"),
            ({ $0.longestRetryDelay = .seconds(86_401) }, "--retry-delay-max must be between --retry-delay and 24 h"),
            ({ $0.deduplicationRetention = .milliseconds(999) }, "--dedup-retention must be at least 1 s"),
            ({ $0.confirmTimeout = .zero }, "--confirm-timeout must be positive"),
            ({ $0.storePoolSize = 1_001 }, "--store-pool-size must be between 1 and 1000"),
            ({ $0.storeStatementTimeout = .zero }, "--store-statement-timeout must be positive"),
            ({ $0.topology.deliveryLimit = 0 }, "--delivery-limit must be at least 1"),
            ({ $0.topology.orderedShards = 65 }, "--ordered-shards must be between 0 (off) and 64"),
            ({ $0.httpPort = 65_536 }, "--http-port must be between 0 and 65535"),
            ({ $0.consumerTimeout = .seconds(1) }, "--consumer-timeout must be at least 2s"),
        ]
        for (change, message) in cases {
            var configuration = WorkerConfiguration()
            change(&configuration)
            do {
                try configuration.validate()
                Issue.record("no error, expected: \(message)")
            } catch {
                #expect(error is ConfigurationError)
                #expect("\(error)" == message)
            }
        }
    }

    @Test("the defaults pass validate(), and so do the edges of each range")
    func edgesAreValid() throws {
        var configuration = WorkerConfiguration()
        try configuration.validate()
        configuration.httpPort = nil
        configuration.topology.orderedShards = 64
        configuration.concurrency = 64
        configuration.retryDelay = .seconds(86_400)
        configuration.longestRetryDelay = .seconds(86_400)
        try configuration.validate()
    }

    @Test("the series the worker exports are listed, with the per-queue and operations endpoint ones")
    func exportedSeries() {
        let names = Set(WorkerMetrics.exportedSeries().map(\.name))
        for name in [
            "wallet_messages_total", "wallet_processing_seconds", "wallet_queue_messages_ready",
            "wallet_http_connections_refused_total", "wallet_build_info", "wallet_last_processed_timestamp_seconds",
        ] {
            #expect(names.contains(name), "\(name) is not listed: \(names.sorted())")
        }
        #expect(names.filter { $0.hasPrefix("wallet_") }.count > 20)
    }

    static func dumped(_ configuration: WorkerConfiguration) -> String {
        var text = ""
        dump(configuration, to: &text)
        return text
    }
}

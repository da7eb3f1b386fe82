import ArgumentParser
import Foundation
import TestSupport
import Testing
import WalletWorker

@testable import wallet_worker

/// Issue 26: the options of `wallet-worker run` are the settings table's, one for one, with its help; and giving
/// every default as a flag changes nothing (the table's defaults are the configuration's).
@Suite("Settings table and the options of run", .cpuBound)
struct SettingsOptionsTests {
    /// `run --help`, wide enough that no option wraps.
    static let runHelp = WalletWorkerCommand.helpMessage(for: WalletWorkerCommand.Run.self, columns: 10_000)

    /// The flags of the options section of a help text.
    static func optionFlags(_ help: String) -> Set<String> {
        let expression = try! NSRegularExpression(pattern: #"^\s+(--[a-z][a-z0-9-]*)"#, options: .anchorsMatchLines)
        let range = NSRange(help.startIndex..., in: help)
        return Set(
            expression.matches(in: help, range: range).compactMap {
                Range($0.range(at: 1), in: help).map { String(help[$0]) }
            }
        ).subtracting(["--help", "--version"])
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    @Test("every option of run is in the table, and every flag of the table is an option of run")
    func runOptionsAreTheTable() {
        let options = Self.optionFlags(Self.runHelp)
        let table = Set(Setting.all.compactMap(\.flagName))
        #expect(options.count > 40)
        #expect(options.subtracting(table).isEmpty, "not in the table: \(options.subtracting(table).sorted())")
        #expect(table.subtracting(options).isEmpty, "not options of run: \(table.subtracting(options).sorted())")
    }

    /// Each group lists its options with their entries (`givenSettings`), and the option's flag comes from the
    /// entry given to `@Option(Setting.x)`: each option, given alone, must change what its own entry changes, so an
    /// option left out of its group's list, or listed with another entry (even one with the same default), fails here.
    @Test("each option, given alone, is applied as the setting whose flag it is")
    func eachOptionIsAppliedAsItsSetting() throws {
        func applied(_ arguments: [String]) throws -> WorkerConfiguration {
            try WalletWorkerCommand.Run.parse(arguments).settings()
        }
        // The test process's environment (AMQP_URL, …) is in both sides.
        let baseline = try applied([])
        let candidates = ["7s", "0.7", "7", "quorum", "debug", "json", "memory", "amqp://candidate-host/%2f"]
        for entry in Setting.configurable {
            let setting = entry.setting
            guard let flag = setting.flagName else { continue }
            let arguments: [String]
            let value: String
            if setting.kind == .flag {
                (arguments, value) = ([flag], "true")
            } else {
                var scratch = WorkerConfiguration()
                let found = candidates.first { text in
                    text != setting.defaultValue && (try? entry.apply(text, to: &scratch)) != nil
                }
                value = try #require(found, "no candidate value parses for \(flag)")
                arguments = [flag, value]
            }
            var expected = baseline
            try entry.apply(value, to: &expected)
            #expect(Self.dumped(try applied(arguments)) == Self.dumped(expected), "\(arguments)")
        }
    }

    @Test("each option's help is the table's, with its variable and default")
    func helpIsTheTables() {
        let help = Self.oneLine(Self.runHelp)
        for setting in Setting.all where setting.kind != .environment {
            #expect(help.contains(Self.oneLine(setting.help)), "run --help lacks: \(setting.help)")
        }
        // The OpenTelemetry variables are named in run's discussion.
        for setting in Setting.all where setting.kind == .environment {
            #expect(help.contains(setting.variable), "run --help does not name \(setting.variable)")
        }
    }

    @Test("declare and dead-letters take the broker options of the table, inspect and migrate its store options")
    func otherCommandsUseTheTable() {
        let table = Set(Setting.all.compactMap(\.flagName))
        func help(_ command: any ParsableCommand.Type) -> String {
            WalletWorkerCommand.helpMessage(for: command, columns: 10_000)
        }
        let declare = Self.optionFlags(help(WalletWorkerCommand.Declare.self))
        #expect(declare.isSubset(of: table) && declare.contains("--amqp-url") && declare.contains("--log-level"))
        let migrate = Self.optionFlags(help(WalletWorkerCommand.Migrate.self))
        #expect(
            migrate.subtracting(["--check", "--retire-older-builds"])
                == ["--store", "--store-statement-timeout", "--log-level", "--log-format"])
        let migrateHelp = Self.oneLine(help(WalletWorkerCommand.Migrate.self))
        #expect(migrateHelp.contains("(env WALLET_STORE_STATEMENT_TIMEOUT). Default: 5s"))
    }

    /// Every option given its default as a flag: the configuration is `WorkerConfiguration()`'s (the environment
    /// of the test process, which may set AMQP_URL or AMQP_TLS_CA_FILE, is overridden by the flags).
    @Test("run with every default as a flag is run with no flag")
    func defaultsAsFlagsChangeNothing() throws {
        var arguments: [String] = []
        for setting in Setting.all where setting.kind == .option {
            guard let value = setting.defaultValue, let flag = setting.flagName else { continue }
            arguments += [flag, value]
        }
        var configuration = try WalletWorkerCommand.Run.parse(arguments).settings()
        var expected = WorkerConfiguration()
        // The TLS files have no default to give, and the longest retry delay is then given rather than computed.
        configuration.tls = expected.tls
        expected.longestRetryDelay = WorkerConfiguration.defaultLongestRetryDelay
        #expect(Self.dumped(configuration) == Self.dumped(expected))
    }

    @Test("a value out of range is an error naming the flag and what it expects, when run's options are parsed")
    func parseErrorsNameTheFlag() throws {
        func message(_ arguments: [String]) -> String? {
            do {
                _ = try WalletWorkerCommand.Run.parse(arguments)
                return nil
            } catch {
                return WalletWorkerCommand.Run.message(for: error)
            }
        }
        #expect(
            message(["--ordered-shards", "65"]) == #"--ordered-shards "65": expected an integer from 0 (off) to 64"#)
        #expect(
            message(["--consumer-timeout", "1s"])
                == #"--consumer-timeout "1s": expected a duration like 30m, from 2s to 87600h"#)
        // Ranges checked on the whole configuration (issue 37: they were critical log lines once the run started).
        #expect(message(["--prefetch", "0"]) == "--prefetch must be at least 1")
        #expect(message(["--prefetch", "1"]) == nil)
    }

    @Test("settings --markdown and --json print the table")
    func settingsCommandParses() throws {
        #expect(try WalletWorkerCommand.Settings.parse(["--json"]).format == .json)
        #expect(try WalletWorkerCommand.Settings.parse(["--markdown"]).format == .markdown)
        #expect(try WalletWorkerCommand.Settings.parse([]).format == .markdown)
    }

    static func dumped(_ configuration: WorkerConfiguration) -> String {
        var text = ""
        dump(configuration, to: &text)
        return text
    }
}

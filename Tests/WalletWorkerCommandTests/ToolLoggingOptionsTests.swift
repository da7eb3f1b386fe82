import ArgumentParser
import TestSupport
import Testing
import WalletWorker

@testable import wallet_worker

/// Issue 37: `migrate`, `inspect`, `route` and `dead-letters` refused `--log-level` and had no `--log-format`; `run`
/// and `declare` took both. Now every command that logs takes them, the one-shot ones at warning by default.
@Suite("The one-shot commands' logging options", .cpuBound)
struct ToolLoggingOptionsTests {
    static let commands: [[String]] = [
        ["migrate"], ["migrate", "--check"], ["inspect", "card", "DC-1"], ["inspect", "message", "m-1"],
        ["inspect", "installation", "i-1"], ["route"], ["dead-letters", "list"], ["dead-letters", "show"],
        ["dead-letters", "replay"], ["dead-letters", "purge"],
    ]

    /// Parsed, where it was "Unknown option '--log-level'" (usage, 64).
    @Test(arguments: commands)
    func everyOneShotCommandTakesTheLoggingOptions(_ command: [String]) throws {
        _ = try WalletWorkerCommand.parseAsRoot(command + ["--log-level", "DEBUG", "--log-format", "json"])
    }

    @Test func theLevelParsesAsRunsDoesAndDefaultsToWarning() throws {
        let given = try ToolLoggingOptions.parse(["--log-level", "Error"])
        #expect(try setting(given.logLevel, Setting.logLevel) == .error)
        let none = try ToolLoggingOptions.parse([])
        #expect(none.logLevel == nil && none.logFormat == nil, "nothing given: warning and the table's format")
        #expect(throws: (any Error).self) { try ToolLoggingOptions.parse(["--log-level", "loud"]).validated() }
    }
}

extension ToolLoggingOptions {
    /// Resolves both options as `bootstrap` does, without bootstrapping.
    fileprivate func validated() throws {
        _ = try setting(logLevel, Setting.logLevel)
        _ = try setting(logFormat, Setting.logFormat)
    }
}

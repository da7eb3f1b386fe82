import BrokerTestSupport
import Foundation
import Testing
import WalletWorker

/// Issue 25: `run --help`, `wallet-notify --help` and the README say the same things: every option and variable
/// of the help is in the README's configuration tables and the other way round, every command gives the one table
/// of exit statuses, and no help says a default twice. The executables are run as an operator runs them.
@Suite("Help and README agree")
struct HelpAndReadmeTests {
    static let readme: String = {
        let path = TestBroker.repositoryRoot.appendingPathComponent("README.md").path
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }()

    /// A command's `--help`, on one line (the help wraps at the terminal's width).
    static func help(_ executable: String, _ arguments: [String]) async throws -> String {
        let (exit, output) = try await runExecutable(
            executable, arguments + ["--help"], environment: ["COLUMNS": "300"])
        #expect(exit == .exited(0), "\(executable) \(arguments) --help: \(exit)\n\(output)")
        return output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    static func matches(_ pattern: String, in text: String, group: Int = 0) -> Set<String> {
        let expression = try! NSRegularExpression(pattern: pattern)
        let range = NSRange(text.startIndex..., in: text)
        return Set(
            expression.matches(in: text, range: range).compactMap {
                Range($0.range(at: group), in: text).map { String(text[$0]) }
            })
    }

    /// The flags and variables of the README table that follows `header` (up to the first line that is not a row).
    static func table(after header: String) -> (flags: Set<String>, variables: Set<String>) {
        guard let start = readme.range(of: header) else { return ([], []) }
        var flags = Set<String>()
        var variables = Set<String>()
        for line in readme[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false).dropFirst(2) {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            guard cells.count > 3 else { continue }
            flags.formUnion(matches(#"`(--[a-z][a-z0-9-]*)`"#, in: String(cells[1]), group: 1))
            variables.formUnion(matches(#"`([A-Z][A-Z0-9_]+)`"#, in: String(cells[2]), group: 1))
        }
        return (flags, variables)
    }

    static let ignoredFlags: Set<String> = ["--help", "--version"]

    @Test(
        "every option and variable of run --help is in the README's configuration table, and every one there is in run --help"
    )
    func runHelpAndReadmeAgree() async throws {
        let help = try await Self.help("wallet-worker", ["run"])
        let helpFlags = Self.matches(#"(?<![\w-])--[a-z][a-z0-9-]*"#, in: help).subtracting(Self.ignoredFlags)
        let helpVariables = Self.matches(#"\(env ([A-Z][A-Z0-9_]+)"#, in: help, group: 1)
            .union(Self.matches(#"OTEL_[A-Z_]+"#, in: help))
        let table = Self.table(after: "| flag | environment variable | default | meaning |")
        #expect(!table.flags.isEmpty && !helpFlags.isEmpty)
        #expect(
            helpFlags.subtracting(table.flags).isEmpty,
            "in run --help, not in the README: \(helpFlags.subtracting(table.flags).sorted())")
        #expect(
            table.flags.subtracting(helpFlags).isEmpty,
            "in the README, not in run --help: \(table.flags.subtracting(helpFlags).sorted())")
        let documented = table.variables.union(Self.matches(#"`(OTEL_[A-Z_]+)`"#, in: Self.readme, group: 1))
        #expect(
            helpVariables.subtracting(documented).isEmpty,
            "variables of run --help not in the README: \(helpVariables.subtracting(documented).sorted())")
        #expect(
            table.variables.subtracting(helpVariables).isEmpty,
            "variables of the README's table not in run --help: \(table.variables.subtracting(helpVariables).sorted())")
        #expect(help.contains("_FILE"), "run --help does not explain the _FILE convention")
    }

    /// Issue 26: the README's table is generated (scripts/check-settings-table.sh checks the same in CI).
    @Test("the README's configuration table is wallet-worker settings --markdown, byte for byte")
    func readmeTableIsGenerated() async throws {
        let (exit, output) = try await runExecutable("wallet-worker", ["settings", "--markdown"])
        #expect(exit == .exited(0), "settings --markdown: \(exit)\n\(output)")
        let begin = "<!-- settings:begin -->\n"
        let end = "<!-- settings:end -->\n"
        let start = try #require(Self.readme.range(of: begin), "README.md has no \(begin)")
        let stop = try #require(Self.readme.range(of: end, range: start.upperBound..<Self.readme.endIndex))
        #expect(
            String(Self.readme[start.upperBound..<stop.lowerBound]) == output,
            "README.md's table differs from wallet-worker settings --markdown: run scripts/check-settings-table.sh --write"
        )
    }

    @Test("wallet-notify --help answers with its usage, and its options and variables are the README's")
    func notifyHelpAndReadmeAgree() async throws {
        let help = try await Self.help("wallet-notify", [])
        let helpFlags = Self.matches(#"(?<![\w-])--[a-z][a-z0-9-]*"#, in: help).subtracting(Self.ignoredFlags)
        let helpVariables = Self.matches(#"\(env ([A-Z][A-Z0-9_]+)"#, in: help, group: 1)
        let table = Self.table(after: "| `wallet-notify` flag | environment variable | default | meaning |")
        #expect(
            !helpFlags.isEmpty && helpFlags == table.flags, "help \(helpFlags.sorted()), README \(table.flags.sorted())"
        )
        #expect(helpVariables == table.variables, "help \(helpVariables.sorted()), README \(table.variables.sorted())")
    }

    @Test("every command gives the one table of exit statuses, the README's, and no help states a default twice")
    func exitStatusesAndDefaults() async throws {
        let commands: [(String, [String])] = [
            ("wallet-worker", ["run"]), ("wallet-worker", ["declare"]), ("wallet-worker", ["route"]),
            ("wallet-worker", ["migrate"]), ("wallet-worker", ["inspect"]), ("wallet-worker", ["inspect", "card"]),
            ("wallet-worker", ["dead-letters"]), ("wallet-notify", []),
        ]
        for (executable, arguments) in commands {
            let help = try await Self.help(executable, arguments)
            #expect(help.contains("Exit status: 0"), "\(executable) \(arguments) --help gives no exit statuses")
            // swift-argument-parser prints "(default: …)" for an option with a default value: a help text that says
            // "Default: …" too says it twice.
            for match in Self.matches(#"Default: \S+ \(default: "#, in: help) {
                Issue.record("\(executable) \(arguments) states a default twice: \(match)")
            }
        }
        let section = Self.readme.components(separatedBy: "### Exit statuses").dropFirst().first ?? ""
        for status in ExitStatus.allCases {
            #expect(section.contains("| \(status.rawValue) |"), "the README's exit status table has no row \(status)")
        }
    }
}

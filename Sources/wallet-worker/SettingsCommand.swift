import ArgumentParser
import Foundation
import WalletOperatorTools
import WalletWorker

extension WalletWorkerCommand {
    /// The settings table, for the README (`--markdown`: scripts/check-settings-table.sh compares) and for scripts
    /// (`--json`: scripts/lib/check-deploy-consistency.py reads the variables and defaults).
    struct Settings: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the settings of run: flag, environment variable, default, meaning.",
            discussion: """
                --markdown (the default) prints the README's configuration table as it must be; --json prints \
                an array of objects with flag (null for a variable without one), variable, kind, default (as the \
                worker reads it, null for none), defaultText (as the README shows it), expected, range, help, \
                meaning and group (the settings of one README row).

                \(ExitStatus.helpText)
                """)

        enum Format: String, EnumerableFlag {
            case markdown, json
        }

        @Flag(help: "Output format")
        var format: Format = .markdown

        func run() throws {
            _ = try StandardOutput.write(Array((format == .json ? Setting.json() : Setting.markdownTable()).utf8))
        }
    }

    /// The Prometheus series of `/metrics`, for the deploy check: every series an alert or the dashboard reads must
    /// be one of them.
    struct Metrics: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the Prometheus series the worker exports: name, type and help, one per line.",
            discussion: """
                Read from a metrics registry made as a running worker makes it (with the per-queue gauges and the \
                operations endpoint's own series), so nothing is left out that /metrics can show. --json prints an \
                array of objects with name, type and help.

                \(ExitStatus.helpText)
                """)

        @Flag(help: "A JSON array instead of lines")
        var json = false

        func run() throws {
            let series = WorkerMetrics.exportedSeries()
            let text: String
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                text = String(decoding: try encoder.encode(series), as: UTF8.self) + "\n"
            } else {
                text = series.map { "\($0.name)\t\($0.type)\t\($0.help)\n" }.joined()
            }
            _ = try StandardOutput.write(Array(text.utf8))
        }
    }
}

import Foundation

// What `wallet-worker settings` prints: the README's configuration table, and the same as JSON for scripts
// (scripts/lib/check-deploy-consistency.py).

extension Setting {
    /// The header line of the table: HelpAndReadmeTests and scripts find the table by it.
    public static let markdownHeader = "| flag | environment variable | default | meaning |"

    /// The README's configuration table, one row per setting or per group of settings, ending with a newline.
    public static func markdownTable(_ settings: [Setting] = all) -> String {
        var lines = [markdownHeader, "|---|---|---|---|"]
        for row in rows(settings) {
            let cells = [
                row.compactMap(\.flagName).map { "`\($0)`" }.joined(separator: ", "),
                row.map { "`\($0.variable)`" }.joined(separator: ", "),
                rowDefault(row),
                row[0].meaning,
            ]
            lines.append("|" + cells.map(markdownCell).joined(separator: "|") + "|")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The settings as the README's rows: consecutive settings of one group share a row.
    public static func rows(_ settings: [Setting] = all) -> [[Setting]] {
        var rows: [[Setting]] = []
        for setting in settings {
            if let group = setting.group, let last = rows.last, last[0].group == group {
                rows[rows.count - 1].append(setting)
            } else {
                rows.append([setting])
            }
        }
        return rows
    }

    /// A row's default: each different one once, "none" left out unless all are none.
    static func rowDefault(_ row: [Setting]) -> String {
        var shown: [String] = []
        for setting in row where setting.defaultText != "none" && !shown.contains(setting.defaultText) {
            shown.append(setting.defaultText)
        }
        return shown.isEmpty ? "none" : shown.joined(separator: ", ")
    }

    private static func markdownCell(_ text: String) -> String {
        text.isEmpty ? " " : " \(text.replacingOccurrences(of: "|", with: "\\|")) "
    }

    /// Every setting as a JSON array of objects: `flag` (null for a variable without one), `variable`, `kind`
    /// (option, flag, environment), `default` (as the worker reads it; null when there is none), `defaultText` (as the
    /// README shows it), `expected`, `range`, `help` (as `run --help` gives it), `meaning` (the README's, its row's
    /// for each setting of a group) and `group`.
    public static func json(_ settings: [Setting] = all) -> String {
        var entries: [Entry] = []
        for row in rows(settings) {
            for setting in row {
                entries.append(Entry(setting: setting, meaning: row[0].meaning))
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // An array of strings and optionals cannot fail to encode.
        let data = try! encoder.encode(entries)
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    private struct Entry: Encodable {
        var setting: Setting
        var meaning: String

        enum CodingKeys: String, CodingKey {
            case flag, variable, kind, `default`, defaultText, expected, range, help, meaning, group
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(setting.flagName, forKey: .flag)
            try container.encode(setting.variable, forKey: .variable)
            try container.encode(setting.kind.rawValue, forKey: .kind)
            try container.encode(setting.defaultValue, forKey: .default)
            try container.encode(setting.defaultText, forKey: .defaultText)
            try container.encode(setting.expected, forKey: .expected)
            try container.encode(setting.range, forKey: .range)
            try container.encode(setting.kind == .environment ? nil : setting.help, forKey: .help)
            try container.encode(meaning, forKey: .meaning)
            try container.encode(setting.group, forKey: .group)
        }
    }
}

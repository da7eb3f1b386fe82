import Foundation

/// One setting of `wallet-worker run`: its flag, its environment variable, its default as operators read it, what
/// a value must be, its range, and the texts of `--help` and of the README's configuration table.
///
/// `Setting.all` (SettingsTable.swift) lists every one, in the README's order. The command's options take their
/// names and help from it, the command resolves each from it (flag, then variable, then `<variable>_FILE`, then
/// the default of `WorkerConfiguration`), `WorkerConfiguration.validate()` checks its ranges, and
/// `wallet-worker settings --markdown | --json` prints it: the README's table is that output.
public struct Setting: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// `--name VALUE`, or `VARIABLE=VALUE`.
        case option
        /// `--name` alone, or `VARIABLE=true`.
        case flag
        /// A variable without a flag: the OpenTelemetry SDK's own (`OTEL_*`), read by swift-otel.
        case environment
    }

    /// The flag without its dashes (`heartbeat`); nil for a variable without a flag.
    public let name: String?
    public let variable: String
    public let kind: Kind
    /// The default as the worker reads it back (`10s`, `20`, `classic`); nil when there is none.
    public let defaultValue: String?
    /// The default as the README shows it (Markdown): "`10s`", "`0` (off)", "none".
    public let defaultText: String
    /// What a value must look like, as the error for one that does not parse says: "a duration like 10s, from 0 to
    /// 87600h". Nil for the variables the worker does not parse itself.
    public let expected: String?
    /// What a parsed value must also be (`--concurrency must be between 1 and 64`); nil when any value is taken.
    public let range: String?
    /// The option's help without the variable and the default, which `help` adds.
    public let summary: String?
    /// The README's meaning column (Markdown); empty when the flag says it all.
    public let meaning: String
    /// Settings that the README lists in one row share a group (the TLS files, the result exchanges, …); nil for a
    /// row of its own. The row's meaning is its first setting's.
    public let group: String?

    /// `--heartbeat`; nil for a variable without a flag.
    public var flagName: String? { name.map { "--" + $0 } }

    /// The option's help in `--help`: the summary, then the variable and the default (the README's, without its
    /// Markdown).
    public var help: String {
        let summary = summary ?? meaning
        switch kind {
        case .flag:
            return "\(summary) (env \(variable)=true)"
        case .option, .environment:
            guard defaultValue != nil else { return "\(summary) (env \(variable))." }
            return "\(summary) (env \(variable)). Default: \(Self.plain(defaultText))"
        }
    }

    /// The same help with another summary and default: for a command whose option means a little less or defaults
    /// to something else (`route --store`, default `memory`).
    public func help(summary: String, default value: String?) -> String {
        value.map { "\(summary) (env \(variable)). Default: \($0)" } ?? "\(summary) (env \(variable))."
    }

    init(
        name: String?, variable: String, kind: Kind, defaultValue: String?, note: String?, shown: String?,
        expected: String?, range: String?, summary: String?, meaning: String, group: String?
    ) {
        self.name = name
        self.variable = variable
        self.kind = kind
        self.defaultValue = defaultValue
        if let shown {
            defaultText = shown
        } else if kind == .flag {
            defaultText = "off" + (defaultValue.map { " (`\($0)`)" } ?? "")
        } else if let defaultValue {
            defaultText = "`\(defaultValue)`" + (note.map { " (\($0))" } ?? "")
        } else {
            defaultText = note ?? "none"
        }
        self.expected = expected
        self.range = range
        self.summary = summary
        self.meaning = meaning
        self.group = group
    }

    /// A variable the worker does not parse itself (the OpenTelemetry SDK's), listed for the README and the deploy
    /// check.
    static func environment(
        _ variable: String, default value: String? = nil, note: String? = nil, shown: String? = nil,
        meaning: String = "", group: String? = nil
    ) -> Setting {
        Setting(
            name: nil, variable: variable, kind: .environment, defaultValue: value, note: note, shown: shown,
            expected: nil, range: nil, summary: nil, meaning: meaning, group: group)
    }

    /// Markdown's backticks taken out, for `--help`.
    static func plain(_ markdown: String) -> String {
        markdown.replacingOccurrences(of: "`", with: "")
    }
}

// MARK: - Typed settings: how a value is parsed and checked

extension Setting {
    /// A setting with the type of its value: how its text is parsed, which values are in range, and where
    /// `WorkerConfiguration` holds it. The commands' options apply it (`apply(_:to:)`, `resolve(_:)`);
    /// `WorkerConfiguration.validate()` checks its range.
    @dynamicMemberLookup
    public struct Typed<Value>: Sendable {
        public let setting: Setting
        /// The value of a text, or nil when it does not parse (or, for a range checked at parsing, is out of it).
        public let parse: @Sendable (String) -> Value?
        /// The values `WorkerConfiguration.validate()` accepts (or the parser, when `checkedWhenParsed`).
        public let range: SettingRange<Value>?
        /// Where `WorkerConfiguration` holds the value.
        let field: SettingField<Value>
        /// Why a text does not parse, said instead of "expected …" and never repeating the text (a PostgreSQL URL
        /// holds a password); nil for the usual error.
        let reason: (@Sendable (String) -> String?)?

        init(
            _ name: String, _ variable: String, field: SettingField<Value>, kind: Kind = .option,
            default value: String?, note: String? = nil, shown: String? = nil, expected: String,
            range: SettingRange<Value>? = nil, checkedWhenParsed: Bool = false, help summary: String, meaning: String,
            group: String? = nil, reason: (@Sendable (String) -> String?)? = nil,
            parse: @escaping @Sendable (String) -> Value?
        ) {
            setting = Setting(
                name: name, variable: variable, kind: kind, defaultValue: value, note: note, shown: shown,
                expected: expected, range: range?.phrase, summary: summary, meaning: meaning, group: group)
            self.range = range
            self.field = field
            self.reason = reason
            if checkedWhenParsed, let range {
                self.parse = { text in parse(text).flatMap { range.contains($0) ? $0 : nil } }
            } else {
                self.parse = parse
            }
        }

        public subscript<T>(dynamicMember keyPath: KeyPath<Setting, T>) -> T { setting[keyPath: keyPath] }

        /// The flag without its dashes (every typed setting has one).
        public var name: String { setting.name! }
        /// `--heartbeat`.
        public var flagName: String { setting.flagName! }
        /// What a value must look like (every typed setting parses its value).
        public var expected: String { setting.expected! }

        /// Throws the error `WorkerConfiguration.validate()` reports when `value` is out of range.
        func check(_ value: Value) throws(ConfigurationError) {
            guard let range, !range.contains(value) else { return }
            throw outOfRange
        }

        /// `--concurrency must be between 1 and 64`.
        var outOfRange: ConfigurationError {
            ConfigurationError("\(flagName) must be \(range?.phrase ?? "valid")")
        }
    }
}

/// The values a setting accepts, and how the error for another says it ("between 1 and 64"): declared once, with
/// the setting, for the parser, `WorkerConfiguration.validate()`, the JSON of `wallet-worker settings`.
public struct SettingRange<Value>: Sendable {
    /// Completes "--flag must be …".
    public let phrase: String
    let contains: @Sendable (Value) -> Bool

    init(phrase: String, contains: @escaping @Sendable (Value) -> Bool) {
        self.phrase = phrase
        self.contains = contains
    }
}

extension SettingRange where Value: Comparable & Sendable {
    init(_ bounds: ClosedRange<Value>, _ phrase: String) {
        self.init(phrase: phrase) { bounds.contains($0) }
    }

    init(_ bounds: PartialRangeFrom<Value>, _ phrase: String) {
        self.init(phrase: phrase) { bounds.contains($0) }
    }

    init(_ bounds: PartialRangeThrough<Value>, _ phrase: String) {
        self.init(phrase: phrase) { bounds.contains($0) }
    }

    /// The same range for a value that may be off (nil, always accepted).
    var whenSet: SettingRange<Value?> {
        let contains = contains
        return SettingRange<Value?>(phrase: phrase) { $0.map(contains) ?? true }
    }
}

extension SettingRange where Value: BinaryInteger & Sendable {
    /// "between 1 and 64".
    static func between(_ bounds: ClosedRange<Value>) -> Self {
        Self(bounds, "between \(bounds.lowerBound) and \(bounds.upperBound)")
    }

    /// "at least 1".
    static func atLeast(_ lower: Value) -> Self {
        Self(lower..., "at least \(lower)")
    }
}

// MARK: - The parsers

enum SettingParsers {
    static func duration(_ text: String) -> Duration? { DurationText.parse(text) }

    /// An integer of at least 0 (the error says "a positive integer"; 0 is then refused by the range check where
    /// it makes no sense).
    static func count(_ text: String) -> Int? {
        Int(text).flatMap { $0 >= 0 ? $0 : nil }
    }

    static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "1", "yes": true
        case "false", "0", "no": false
        default: nil
        }
    }

    /// "classic or quorum", "trace, debug, …, error or critical".
    static func alternatives(_ values: [String]) -> String {
        guard let last = values.last else { return "" }
        return values.count == 1 ? last : values.dropLast().joined(separator: ", ") + " or " + last
    }
}

import AMQPTransport
import Foundation
import Logging
import Synchronization
import WalletRouting

/// Installs the process's log handler: text for people, JSON lines for collectors (`--log-format json`).
public enum WorkerLogging {
    /// - Parameter secrets: values masked in every line, whoever logs them (`SecretRedaction`).
    public static func bootstrap(format: LogFormat, level: Logger.Level, secrets: SecretRedaction = .none) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                switch format {
                case .text: StreamLogHandler.standardError(label: label)
                case .json: JSONLogHandler(label: label)
                }
            handler.logLevel = level
            // Always: a URL's password is masked even when the configuration names no secret.
            return RedactingLogHandler(handler, secrets: secrets)
        }
    }
}

/// The secrets of a configuration (the broker's and PostgreSQL's passwords, collector tokens of the
/// `OTEL_EXPORTER_OTLP_*HEADERS`), masked as `***` in every log line, whichever library writes it.
///
/// The worker's own code never logs them (URLs print with `***` for the password, header values are not logged):
/// this is the net under that, for what libraries log (swift-otel logs each `OTEL_*` variable it applies, with its
/// value) and for a secret that turns up where nobody expected it, such as a password pasted into a host name.
/// Values shorter than `minimumLength` are left out: masking `guest` or `wallet` would mask user names, queue
/// names and every other word that happens to contain them; such a value is still never logged by the worker.
/// Whatever its length, the password of any URL a line contains (`scheme://user:password@host`) is masked too.
public struct SecretRedaction: Sendable, Hashable {
    public static let minimumLength = 8
    public static let none = SecretRedaction([])

    /// Longest first, so a secret that contains another is masked whole.
    public let values: [String]

    public init(_ values: [String]) {
        self.values = Set(values.filter { $0.utf8.count >= Self.minimumLength }).sorted {
            $0.utf8.count > $1.utf8.count
        }
    }

    /// `text` with every secret and every URL's password replaced by `***`.
    public func redact(_ text: String) -> String {
        var text = Self.maskingURLPasswords(in: text)
        for secret in values where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: "***")
        }
        return text
    }

    /// `text` with the password of each URL in it (`scheme://user:password@host`) replaced by `***`, by
    /// `AMQPURL.redacted`'s rule applied to each URL's authority (up to the first `/`, `?`, `#` or white space).
    public static func maskingURLPasswords(in text: String) -> String {
        guard text.contains("://") else { return text }
        var result = ""
        var rest = text[...]
        while let scheme = rest.firstRange(of: "://") {
            result += rest[..<scheme.upperBound]
            rest = rest[scheme.upperBound...]
            let authorityEnd = rest.firstIndex { "/?#".contains($0) || $0.isWhitespace } ?? rest.endIndex
            result += AMQPURL.redacted(String(rest[..<authorityEnd]))
            rest = rest[authorityEnd...]
        }
        return result + rest
    }

    /// The secrets of `configuration` and of the OpenTelemetry variables of `environment`: the broker's password
    /// (percent-decoded and as written in the URL), the store's, each header value of
    /// `OTEL_EXPORTER_OTLP_HEADERS` and its per-signal forms (as written and percent-decoded), and the password of
    /// an `OTEL_EXPORTER_OTLP_ENDPOINT` URL (and of its per-signal forms).
    public static func of(_ configuration: WorkerConfiguration, environment: [String: String]) -> SecretRedaction {
        var values: [String] = []
        values += passwords(inURL: configuration.amqpURL)
        if case .postgres(let location) = configuration.store, let password = location.password {
            values.append(password)
            values.append(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password)
        }
        for (name, value) in environment where name.hasPrefix("OTEL_EXPORTER_OTLP") {
            if name.hasSuffix("HEADERS") { values += headerValues(value) }
            if name.hasSuffix("ENDPOINT") { values += passwords(inURL: value) }
        }
        return SecretRedaction(values)
    }

    /// The password of an `amqp://` or `postgres://` URL, decoded and as written; none when there is none.
    public static func passwords(inURL url: String) -> [String] {
        let start = url.firstRange(of: "://")?.upperBound ?? url.startIndex
        guard let at = url[start...].lastIndex(of: "@"), let colon = url[start..<at].firstIndex(of: ":") else {
            return []
        }
        let written = String(url[url.index(after: colon)..<at])
        return [written, written.removingPercentEncoding ?? written]
    }

    /// `k=v,k2=v2` (the OpenTelemetry header list): each value, as written and percent-decoded, and the whole list.
    static func headerValues(_ list: String) -> [String] {
        var values = [list]
        for pair in list.split(separator: ",") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            values.append(value)
            values.append(value.removingPercentEncoding ?? value)
            // `Bearer <token>`: the token alone, in case a library prints it without its scheme.
            if let space = value.lastIndex(of: " ") { values.append(String(value[value.index(after: space)...])) }
        }
        return values
    }
}

/// Masks `SecretRedaction`'s values in the message, the metadata and the error of every event, then hands it on.
struct RedactingLogHandler: LogHandler {
    private var inner: any LogHandler
    private let secrets: SecretRedaction

    init(_ inner: any LogHandler, secrets: SecretRedaction) {
        self.inner = inner
        self.secrets = secrets
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue.mapValues(redacted) }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue.map(redacted) }
    }

    func log(event: LogEvent) {
        var event = event
        let message = event.message.description
        let redactedMessage = secrets.redact(message)
        if redactedMessage != message { event.message = "\(redactedMessage)" }
        event.metadata = event.metadata?.mapValues(redacted)
        if let error = event.error {
            let text = "\(error)"
            let redactedText = secrets.redact(text)
            if redactedText != text { event.error = RedactedError(description: redactedText) }
        }
        inner.log(event: event)
    }

    private func redacted(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text):
            let redactedText = secrets.redact(text)
            return redactedText == text ? value : .string(redactedText)
        case .stringConvertible(let convertible):
            let text = convertible.description
            let redactedText = secrets.redact(text)
            return redactedText == text ? value : .string(redactedText)
        case .array(let values):
            return .array(values.map(redacted))
        case .dictionary(let dictionary):
            return .dictionary(dictionary.mapValues(redacted))
        }
    }

    private struct RedactedError: Error, CustomStringConvertible {
        var description: String
    }
}

/// One JSON object per line on standard error: `time`, `level`, `label`, `message`, `source`, then the metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error { merged["error"] = "\(error)" }

        var writer = JSONWriter(reservingCapacity: 256)
        writer.beginObject()
        writer.key("time")
        writer.string(Date.now.formatted(Self.timeFormat))
        writer.key("level")
        writer.string(event.level.rawValue)
        writer.key("label")
        writer.string(label)
        writer.key("message")
        writer.string(event.message.description)
        writer.key("source")
        writer.string(event.source)
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            writer.key(key)
            Self.write(value, into: &writer)
        }
        writer.endObject()
        var line = writer.takeBytes()
        line.append(UInt8(ascii: "\n"))
        Self.output.withLock { _ in
            FileHandle.standardError.write(Data(line))
        }
    }

    /// UTC with milliseconds and the `Z`: `2026-11-21T07:45:18.025Z`.
    private static let timeFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Serialises writes so lines from different threads never interleave.
    private static let output = Mutex(())

    private static func write(_ value: Logger.Metadata.Value, into writer: inout JSONWriter) {
        switch value {
        case .string(let text): writer.string(text)
        case .stringConvertible(let convertible): writer.string(convertible.description)
        case .array(let values):
            writer.beginArray()
            for element in values { write(element, into: &writer) }
            writer.endArray()
        case .dictionary(let dictionary):
            writer.beginObject()
            for (key, element) in dictionary.sorted(by: { $0.key < $1.key }) {
                writer.key(key)
                write(element, into: &writer)
            }
            writer.endObject()
        }
    }
}

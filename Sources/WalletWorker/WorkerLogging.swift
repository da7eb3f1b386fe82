import Foundation
import Logging
import Synchronization
import WalletRouting

/// Installs the process's log handler: text for people, JSON lines for collectors (`--log-format json`).
public enum WorkerLogging {
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                switch format {
                case .text: StreamLogHandler.standardError(label: label)
                case .json: JSONLogHandler(label: label)
                }
            handler.logLevel = level
            return handler
        }
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

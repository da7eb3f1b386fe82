import Locking
import Logging

/// The lines a logger wrote, kept as events (level, message, metadata, error): for checks of what an operator reads.
/// `Handler` is the `LogHandler` that keeps them, alone or under another handler (redaction, OpenTelemetry's
/// diagnostics); `texts` gives each as one line of text to search.
public final class CapturedLog: Sendable {
    public struct Line: Sendable {
        public var level: Logger.Level
        public var message: String
        /// The handler's own metadata and the event's, each value as text.
        public var metadata: [String: String]
        public var error: String?

        /// Level, message, metadata (`key=value`, by key) and error, on one line.
        public var text: String {
            let pairs = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "\(level) \(message) \(pairs.joined(separator: " ")) \(error ?? "")"
        }
    }

    private let lines = Locked<[Line]>([])
    private let watchers = ConditionWaiters<[String]>()

    public init() {}

    public var all: [Line] { lines.withLock { $0 } }
    public var texts: [String] { all.map(\.text) }

    /// A logger that keeps what it is given from `level` up.
    public func logger(label: String = "captured", level: Logger.Level) -> Logger {
        var logger = Logger(label: label) { _ in Handler(self) }
        logger.logLevel = level
        return logger
    }

    /// Waits until a line's text contains `text` (or the task is cancelled: a test's time limit).
    public func waitFor(_ text: String) async {
        await watchers.wait(until: { $0.contains { $0.contains(text) } }, current: { texts })
    }

    /// Waits until `count` lines' texts contain `text` (or the task is cancelled: a test's time limit).
    public func waitFor(_ text: String, count: Int) async {
        // The waiters are handed only the newest line: the count is read from all of them.
        await watchers.wait(until: { _ in self.texts.count { $0.contains(text) } >= count }, current: { texts })
    }

    fileprivate func append(_ line: Line) {
        lines.withLock { $0.append(line) }
        // Lines are only ever added: a waiter saw the earlier ones when it began, so the new one is all it needs.
        watchers.changed([line.text])
    }

    public struct Handler: LogHandler {
        private let log: CapturedLog
        public var metadata: Logger.Metadata = [:]
        public var logLevel: Logger.Level = .trace

        public init(_ log: CapturedLog) { self.log = log }

        public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        public func log(event: LogEvent) {
            var merged = metadata
            if let explicit = event.metadata { merged.merge(explicit) { $1 } }
            log.append(
                Line(
                    level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" },
                    error: event.error.map { "\($0)" }))
        }
    }
}

import Logging
import Synchronization

/// The lines an in-process worker logs, kept as events (level, message, metadata): for checks of what an operator
/// reads, such as a flood of hostile messages staying a few lines a minute.
final class CapturedLog: Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]

        /// Which warning it is: the message without what the storms add (` (and 8,773 more like it in the last
        /// 60s)`, or a summary's `: 12 more like it in the last 60s`).
        var kind: String {
            if let carried = message.range(of: " (and ") { return String(message[..<carried.lowerBound]) }
            if let summary = message.range(of: #": [0-9,]+ more like it in the last "#, options: .regularExpression) {
                return String(message[..<summary.lowerBound])
            }
            return message
        }

        /// How many lines like it this one stands for, beyond itself (its `held_back`).
        var heldBack: Int { metadata["held_back"].flatMap { Int($0) } ?? 0 }

        /// A summary line: it stands only for the lines it counts.
        var isSummary: Bool {
            message.range(of: #": [0-9,]+ more like it in the last "#, options: .regularExpression) != nil
        }
    }

    private let lines = Mutex<[Line]>([])

    var all: [Line] { lines.withLock { $0 } }

    /// A logger that keeps what it is given from `level` up.
    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "wallet-worker-under-test") { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            if let explicit = event.metadata { merged.merge(explicit) { $1 } }
            log.append(
                Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}

import Logging
import Synchronization

/// The worker's repeated warnings, shared by every pipeline's observer: each kind is written its burst of lines an
/// interval, then held back until the next line can say how many were (`RepeatedWarnings`); `flush` writes the count
/// of a storm that ended before its next line. Metrics keep the exact counts.
final class WarningStorms: Sendable {
    private let warnings: Mutex<RepeatedWarnings>
    private let clock: WorkerClock
    /// How often a storm is summarised: the summariser's period.
    let interval: Duration

    init(interval: Duration = .seconds(60), clock: WorkerClock) {
        warnings = Mutex(RepeatedWarnings(interval: interval))
        self.clock = clock
        self.interval = interval
    }

    /// Writes `message` at `level` unless its kind has written its burst in the interval that is running; a line
    /// written after some were held back says how many. `metadata` is built only when the line is written.
    func log(
        _ kind: RepeatedWarnings.Kind, level: Logger.Level = .warning, _ message: String,
        metadata: @autoclosure () -> Logger.Metadata, to logger: Logger
    ) {
        guard logger.logLevel <= level else { return }
        let now = clock.now
        guard case .write(let heldBack, let over) = warnings.withLock({ $0.occurred(kind, now: now) }) else { return }
        guard heldBack > 0 else {
            logger.log(level: level, "\(message)", metadata: metadata())
            return
        }
        var extra = metadata()
        extra["held_back"] = "\(heldBack)"
        logger.log(level: level, "\(message) (and \(Self.heldBackText(heldBack, over: over)))", metadata: extra)
    }

    /// Writes the count of every storm whose interval ended with lines held back; with `all`, of every storm (the
    /// worker stops).
    func flush(to logger: Logger, all: Bool = false) {
        let now = clock.now
        let summaries = warnings.withLock { all ? $0.remainingSummaries(now: now) : $0.dueSummaries(now: now) }
        for summary in summaries {
            logger.warning(
                "\(summary.kind.name): \(Self.heldBackText(summary.heldBack, over: summary.over))",
                metadata: ["held_back": "\(summary.heldBack)"])
        }
    }

    /// `8,773 more like it in the last 60s`.
    static func heldBackText(_ count: Int, over: Duration) -> String {
        "\(grouped(count)) more like it in the last \(DurationText.format(over))"
    }

    /// `8773` as `8,773`, whatever the locale: log lines are read by people and searched by tools.
    static func grouped(_ count: Int) -> String {
        let digits = Array(String(count.magnitude))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return count < 0 ? "-" + text : text
    }
}

extension RepeatedWarnings.Kind {
    /// A delivery's own line at warning or above (`sent to the retry queue`, `rejected and dead-lettered`, ...): the
    /// first 10 of an interval, with their message ids, then the count. Each message's story is also in the metrics,
    /// its results and the dead-letter queue (`wallet-worker dead-letters`).
    static func fate(_ fate: DeliveryFate) -> Self { Self(fate.logMessage, burst: 10) }

    /// A message's malformed `reply_to`: hostile input, one line per message like its fate's.
    static let malformedReplyTo = Self(
        "reply_to is malformed (not UTF-8, or a direct reply-to address RabbitMQ cannot decode); its copies were not published",
        burst: 10)
    static let publishNotConfirmed = Self("publish not confirmed")
    static let resultNotTaken = Self("dead-lettered, but its rejected result was not taken")
    static let requeueDelayed = Self("retry and dead-letter publishes failed; requeueing after a delay")
}

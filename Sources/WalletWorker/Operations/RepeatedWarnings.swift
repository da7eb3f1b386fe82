/// Keeps a storm of the same warning readable: each kind is written the first time, then at most once per
/// `interval`, that line saying how many like it were held back since the last one written (`... and 8,773 more
/// like it in the last 60 s`); `dueSummaries` says the count of a storm that ended before its next line. Metrics
/// keep the exact counts: this decides only what is written. Pure: the caller passes the time (`WorkerClock`).
///
/// A kind is a fixed name (`Kind`), never built from a message's data, so the table stays as small as the list.
struct RepeatedWarnings: Sendable {
    /// Which warning: one kind per log message the storms repeat.
    struct Kind: Hashable, Sendable, CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { name }
    }

    /// What to do with one occurrence.
    enum Decision: Sendable, Equatable {
        /// Write it. `heldBack` lines like it were not written in the `over` before it (0 for the first of a storm).
        case write(heldBack: Int, over: Duration)
        /// Count it and write nothing: a line of its kind was written less than `interval` ago.
        case holdBack
    }

    /// The lines held back of a kind whose interval ended without another occurrence to carry them.
    struct Summary: Sendable, Equatable {
        var kind: Kind
        var heldBack: Int
        var over: Duration
    }

    /// Default: 60 s.
    let interval: Duration
    private var storms: [Kind: Storm] = [:]

    private struct Storm: Sendable {
        /// When the last line of the kind was written.
        var lastWritten: Duration
        var heldBack: Int
    }

    init(interval: Duration = .seconds(60)) {
        precondition(interval > .zero, "a summary interval must be positive")
        self.interval = interval
    }

    /// One occurrence of `kind` at `now`.
    mutating func occurred(_ kind: Kind, now: Duration) -> Decision {
        guard var storm = storms[kind] else {
            storms[kind] = Storm(lastWritten: now, heldBack: 0)
            return .write(heldBack: 0, over: .zero)
        }
        let since = now - storm.lastWritten
        guard since >= interval else {
            storm.heldBack += 1
            storms[kind] = storm
            return .holdBack
        }
        storms[kind] = Storm(lastWritten: now, heldBack: 0)
        return .write(heldBack: storm.heldBack, over: since)
    }

    /// The kinds whose interval has ended with lines held back: each is reported once, and the kind starts afresh
    /// (its next occurrence is written as the first of a storm). Kinds that went quiet with nothing held back are
    /// forgotten. For a periodic flush, at least once per `interval`.
    mutating func dueSummaries(now: Duration) -> [Summary] {
        var due: [Summary] = []
        for (kind, storm) in storms where now - storm.lastWritten >= interval {
            storms[kind] = nil
            if storm.heldBack > 0 {
                due.append(Summary(kind: kind, heldBack: storm.heldBack, over: now - storm.lastWritten))
            }
        }
        return due.sorted { $0.kind.name < $1.kind.name }
    }

    /// Everything held back, whatever its interval: for the worker's last lines as it stops.
    mutating func remainingSummaries(now: Duration) -> [Summary] {
        let remaining = storms.compactMap { kind, storm in
            storm.heldBack > 0 ? Summary(kind: kind, heldBack: storm.heldBack, over: now - storm.lastWritten) : nil
        }
        storms = [:]
        return remaining.sorted { $0.kind.name < $1.kind.name }
    }
}

/// Keeps a storm of the same warning readable: each kind is written the first `burst` times in an interval, then held
/// back until the interval is over; the next line written says how many like it were held back (`... and 8,773 more
/// like it in the last 60s`), and `dueSummaries` says the count of a storm that ended before its next line. Metrics
/// keep the exact counts: this decides only what is written. Pure: the caller passes the time (`WorkerClock`).
///
/// A kind is a fixed name (`Kind`), never built from a message's data, so the table stays as small as the list.
struct RepeatedWarnings: Sendable {
    /// Which warning: one kind per log message the storms repeat.
    struct Kind: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Lines of the kind written in an interval before the rest are held back: 1 for a warning about the
        /// worker, more for a message's own line (a few examples with their message ids, then the count).
        let burst: Int
        init(_ name: String, burst: Int = 1) {
            precondition(burst >= 1, "a warning's burst must be at least 1")
            self.name = name
            self.burst = burst
        }
        var description: String { name }
    }

    /// What to do with one occurrence.
    enum Decision: Sendable, Equatable {
        /// Write it. `heldBack` lines like it were not written in the `over` before it (0 for the first of a storm).
        case write(heldBack: Int, over: Duration)
        /// Count it and write nothing: its kind has written its `burst` of lines in the interval that is running.
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
        /// When the interval began: the first line of the storm, or the first after the last interval ended.
        var began: Duration
        /// Lines written since it began.
        var written: Int
        var heldBack: Int
    }

    init(interval: Duration = .seconds(60)) {
        precondition(interval > .zero, "a summary interval must be positive")
        self.interval = interval
    }

    /// One occurrence of `kind` at `now`.
    mutating func occurred(_ kind: Kind, now: Duration) -> Decision {
        guard var storm = storms[kind] else {
            storms[kind] = Storm(began: now, written: 1, heldBack: 0)
            return .write(heldBack: 0, over: .zero)
        }
        let since = now - storm.began
        guard since >= interval else {
            if storm.written < kind.burst {
                storm.written += 1
                storms[kind] = storm
                return .write(heldBack: 0, over: .zero)
            }
            storm.heldBack += 1
            storms[kind] = storm
            return .holdBack
        }
        storms[kind] = Storm(began: now, written: 1, heldBack: 0)
        return .write(heldBack: storm.heldBack, over: since)
    }

    /// The kinds whose interval has ended with lines held back: each is reported once, and the kind starts afresh
    /// (its next occurrence is written as the first of a storm). Kinds that went quiet with nothing held back are
    /// forgotten. For a periodic flush, at least once per `interval`.
    mutating func dueSummaries(now: Duration) -> [Summary] {
        var due: [Summary] = []
        for (kind, storm) in storms where now - storm.began >= interval {
            storms[kind] = nil
            if storm.heldBack > 0 {
                due.append(Summary(kind: kind, heldBack: storm.heldBack, over: now - storm.began))
            }
        }
        return due.sorted { $0.kind.name < $1.kind.name }
    }

    /// Everything held back, whatever its interval: for the worker's last lines as it stops.
    mutating func remainingSummaries(now: Duration) -> [Summary] {
        let remaining = storms.compactMap { kind, storm in
            storm.heldBack > 0 ? Summary(kind: kind, heldBack: storm.heldBack, over: now - storm.began) : nil
        }
        storms = [:]
        return remaining.sorted { $0.kind.name < $1.kind.name }
    }
}

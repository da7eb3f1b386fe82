/// Whether the store takes writes, as the delivery lifecycle knows it, and the probe that finds it back: one
/// sub-machine of `DeliveryLifecycle` (as postgres-nio's pool keeps its connection group and request queue apart).
/// Each state carries its own data; each input says what follows, and the lifecycle turns that into timers, checks
/// and reports, and into what the pipelines do (hold, give back, resume). Pure: no clock, no randomness.
struct StoreAvailability: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// Takes writes, as far as anyone knows.
        case available
        /// Out since `since`. The probe's try `attempt` waits for its timer, or is the check `checking`.
        case out(since: Duration, attempt: Int, checking: DeliveryLifecycle.CheckID?)
    }

    /// What a probe's answer means.
    enum ProbeAnswer: Sendable, Equatable {
        /// Not the probe in flight, or no outage: nothing follows.
        case ignored
        /// The store is back, after an outage of this long.
        case back(after: Duration)
        /// Still out: the next try is `attempt` (its timer's delay grows with it).
        case stillOut(nextAttempt: Int)
    }

    private(set) var state = State.available

    var isOut: Bool {
        if case .out = state { true } else { false }
    }

    /// A failure found the store out. True when this begins an outage (its first probe is try 1); false when it was
    /// out already.
    mutating func wentOut(now: Duration) -> Bool {
        guard case .available = state else { return false }
        state = .out(since: now, attempt: 1, checking: nil)
        return true
    }

    /// Whether the probe's timer, firing now, starts a check: the store is out and no check is in flight.
    var probeIsDue: Bool {
        if case .out(_, _, nil) = state { true } else { false }
    }

    /// The probe's check `check` was started (`probeIsDue` was true).
    mutating func probeStarted(_ check: DeliveryLifecycle.CheckID) {
        guard case .out(let since, let attempt, nil) = state else {
            preconditionFailure("a probe started with no outage, or beside another: \(state)")
        }
        state = .out(since: since, attempt: attempt, checking: check)
    }

    /// The probe's check answered: `passed` when the store took the write.
    mutating func probeAnswered(_ check: DeliveryLifecycle.CheckID, passed: Bool, now: Duration) -> ProbeAnswer {
        guard case .out(let since, let attempt, check?) = state else { return .ignored }
        if passed {
            state = .available
            return .back(after: now - since)
        }
        state = .out(since: since, attempt: attempt + 1, checking: nil)
        return .stillOut(nextAttempt: attempt + 1)
    }

    /// The probe's check answered while the worker stops: no further probe, and the outage stays as it is.
    mutating func probeAbandoned(_ check: DeliveryLifecycle.CheckID) {
        guard case .out(let since, let attempt, check?) = state else { return }
        state = .out(since: since, attempt: attempt, checking: nil)
    }
}

/// Whether the results' side takes what the worker publishes, as the delivery lifecycle knows it: one sub-machine of
/// `DeliveryLifecycle`, as `StoreAvailability` is for the store. `ResultsKillSwitch` says when it trips; this says
/// what the worker is doing about it:
///
/// - `taking`: results are taken; a refusal is the message's own (retried, then dead-lettered).
/// - `paused`: a failure every message meets. No pipeline consumes; everything held was given back (the results
///   already recorded are published again by the replay when the messages come back), or, on a quorum work queue,
///   the refused deliveries are held and the trial publishes their results again
///   (`DeliveryLifecycle.Configuration.holdsRefusedThroughAPause`). The trial waits for its timer, on a backoff that
///   grows with each trial that fails.
/// - `trying`: the pipelines consume again. The first delivery whose results are taken ends the pause; refused
///   deliveries are held (not retried) meanwhile, and `activation` distinct ones refused, or a confirm timeout,
///   pause again. A trial that sees no verdict for a window resumes: one message's own refusal (the only one in the
///   queue) must not keep the worker paused, and a queue with nothing in it says nothing against the results. (Unless
///   it holds a message on its last attempt that the kill switch will not let be dead-lettered: then the lifecycle
///   pauses it again, `ResultsKillSwitch.lastAttemptRefused`.)
///
/// Pure: no clock, no randomness.
struct ResultsAvailability: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case taking
        /// Since `since`, for `cause`; trial `attempt` waits for its timer. `gaveBack` deliveries were given back
        /// since the pause began (every trial's included).
        case paused(since: Duration, cause: String, attempt: Int, gaveBack: Int)
        /// Trial `attempt` consumes; `refused` names the distinct messages whose results were refused in it;
        /// `deadline` is the timer that resumes a trial without a verdict.
        case trying(
            since: Duration, cause: String, attempt: Int, gaveBack: Int, refused: Set<String>,
            deadline: DeliveryLifecycle.TimerID?)
    }

    /// What a trial's delivery outcome means.
    enum TrialVerdict: Sendable, Equatable {
        /// Results are taken again: the pause ends, after `after`, having given back `gaveBack` deliveries.
        case resumes(after: Duration, gaveBack: Int)
        /// Refused, with fewer than the activation count of distinct messages: the batch is held for the verdict.
        case holds
        /// Enough refused (or a confirm timed out): paused again.
        case pausesAgain(cause: String)
    }

    private(set) var state = State.taking

    var isPaused: Bool {
        if case .paused = state { true } else { false }
    }

    var isTrying: Bool {
        if case .trying = state { true } else { false }
    }

    /// The kill switch tripped (while taking) or a trial failed: paused. Returns the trial attempt to wait for.
    mutating func pause(now: Duration, cause: String) -> Int {
        switch state {
        case .taking:
            state = .paused(since: now, cause: cause, attempt: 1, gaveBack: 0)
            return 1
        case .trying(let since, _, let attempt, let gaveBack, _, _):
            state = .paused(since: since, cause: cause, attempt: attempt + 1, gaveBack: gaveBack)
            return attempt + 1
        case .paused(_, _, let attempt, _):
            preconditionFailure("paused twice (trial \(attempt))")
        }
    }

    /// Deliveries given back for the pause.
    mutating func gaveBack(_ count: Int) {
        switch state {
        case .taking: break
        case .paused(let since, let cause, let attempt, let gaveBack):
            state = .paused(since: since, cause: cause, attempt: attempt, gaveBack: gaveBack + count)
        case .trying(let since, let cause, let attempt, let gaveBack, let refused, let deadline):
            state = .trying(
                since: since, cause: cause, attempt: attempt, gaveBack: gaveBack + count, refused: refused,
                deadline: deadline)
        }
    }

    /// The trial's timer fired: the pipelines consume again, and `deadline` resumes the trial without a verdict.
    /// False when there is no pause to try (a stale timer).
    mutating func trialBegins(deadline: DeliveryLifecycle.TimerID) -> Bool {
        guard case .paused(let since, let cause, let attempt, let gaveBack) = state else { return false }
        state = .trying(
            since: since, cause: cause, attempt: attempt, gaveBack: gaveBack, refused: [], deadline: deadline)
        return true
    }

    /// When the pause began (while paused or trying).
    var pausedSince: Duration? {
        switch state {
        case .taking: nil
        case .paused(let since, _, _, _), .trying(let since, _, _, _, _, _): since
        }
    }

    /// The trial the current state is in, for its log line.
    var attempt: Int? {
        switch state {
        case .taking: nil
        case .paused(_, _, let attempt, _), .trying(_, _, let attempt, _, _, _): attempt
        }
    }

    /// A delivery of the trial had its results taken.
    mutating func trialDelivered(now: Duration) -> TrialVerdict {
        guard case .trying(let since, _, _, let gaveBack, _, _) = state else { return .holds }
        state = .taking
        return .resumes(after: now - since, gaveBack: gaveBack)
    }

    /// A delivery of the trial had a result refused; `key` names its message. Paused again once `activation`
    /// distinct messages were refused.
    mutating func trialRefused(key: String, reason: String, activation: Int) -> TrialVerdict {
        guard case .trying(let since, let cause, let attempt, let gaveBack, var refused, let deadline) = state
        else { return .holds }
        refused.insert(key)
        state = .trying(
            since: since, cause: cause, attempt: attempt, gaveBack: gaveBack, refused: refused, deadline: deadline)
        guard refused.count >= activation else { return .holds }
        return .pausesAgain(
            cause:
                "\(refused.count) distinct messages' results refused in trial \(attempt) (the activation count): \(reason)"
        )
    }

    /// Whether `timer` is the current trial's deadline.
    func isTrialDeadline(_ timer: DeliveryLifecycle.TimerID) -> Bool {
        if case .trying(_, _, _, _, _, timer?) = state { true } else { false }
    }

    /// The trial's deadline fired: no verdict came in its window. Resumes when `timer` is the trial's.
    mutating func trialDeadlinePassed(_ timer: DeliveryLifecycle.TimerID, now: Duration) -> TrialVerdict? {
        guard case .trying(let since, _, _, let gaveBack, _, timer?) = state else { return nil }
        state = .taking
        return .resumes(after: now - since, gaveBack: gaveBack)
    }
}

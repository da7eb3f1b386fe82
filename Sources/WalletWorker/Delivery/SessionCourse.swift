/// How far one session has come, apart from the batches it holds: connecting, consuming (taking work, or handing
/// back what arrives), ended. One sub-machine of `DeliveryLifecycle`, as `StoreAvailability` is (postgres-nio's pool
/// keeps its connection group and request queue apart the same way). Each state carries its own data, so the
/// combinations that five Booleans allowed and no path reaches (a stop asked of an ended session, a consumer ended
/// before it started) cannot be written down. Pure: the lifecycle asks it what follows and turns that into actions.
struct SessionCourse: Sendable, Equatable {
    /// Why a consuming session takes nothing more: what arrives, and what it had not committed, is left to the
    /// channel's close, and the broker delivers it again.
    enum HandBack: Sendable, Equatable {
        /// The worker failed, or a batch failed while the session was stopping.
        case closing
        /// The worker is stopping (SIGTERM), and the store is out or the batch waits for it.
        case stopping
        /// A shard's session is stopping: the shard goes to another replica with the deliveries it did not start.
        case shardHandedOver
        /// The store has been out for this long: given back before the broker's consumer timeout; the pipeline
        /// pauses until the store answers.
        case heldForTheStore(Duration)
        /// The results' side refuses what every message publishes (`ResultsAvailability`): what is held goes back;
        /// the pipeline pauses until a trial finds the results taken again.
        case pausedForResults

        /// Why a delivery was requeued, for its end's report.
        var reason: String {
            switch self {
            case .closing: "the session is closing"
            case .stopping: "the worker is stopping"
            case .shardHandedOver: "handed over with its shard"
            case .heldForTheStore(let held):
                "held \(DurationText.format(held)) for the store: given back before the broker's consumer timeout"
            case .pausedForResults: "the results are not taken: given back until they are"
            }
        }
    }

    /// A session whose consumer is open (`sessionStarted` came) and that has not ended.
    struct Consuming: Sendable, Equatable {
        /// The worker asked the session to stop: it takes nothing new from the broker (a work-queue session
        /// cancelled its consumer) and finishes what it took on.
        var stopRequested: Bool
        /// The consumer's sequence ended (cancelled on request, or by the broker without an error).
        var consumerEnded = false
        /// `cancelConsumer` was sent.
        var cancelRequested = false
        /// Set once the session takes nothing more.
        var handBack: HandBack?
    }

    enum State: Sendable, Equatable {
        /// Its connections are being opened. A stop may have been asked for already.
        case connecting(stopRequested: Bool)
        case consuming(Consuming)
        /// `endSession` was sent, with this end; `handBack` is why what still arrives is not processed.
        case ended(SessionEnd, wasConsuming: Bool, handBack: HandBack?)
    }

    private(set) var state = State.connecting(stopRequested: false)

    // MARK: - What it is

    /// The consumer is open and the session has not ended.
    var isConsuming: Bool {
        if case .consuming = state { true } else { false }
    }

    /// It consumed at some point (it is consuming, or ended after consuming).
    var hasConsumed: Bool {
        switch state {
        case .connecting: false
        case .consuming: true
        case .ended(_, let wasConsuming, _): wasConsuming
        }
    }

    /// The end `endSession` was sent with; nil before.
    var end: SessionEnd? {
        if case .ended(let end, _, _) = state { end } else { nil }
    }

    /// `endSession` was sent.
    var hasEnded: Bool { end != nil }

    /// It stores new batches: consuming, and not handing back.
    var takesWork: Bool {
        if case .consuming(let consuming) = state { consuming.handBack == nil } else { false }
    }

    /// What arrives now is left to the channel's close, unprocessed (the session ended or takes nothing more).
    var handsBackWhatArrives: Bool {
        switch state {
        case .connecting: false
        case .consuming(let consuming): consuming.handBack != nil
        case .ended: true
        }
    }

    /// Why what it hands back is handed back.
    var handBackReason: String {
        switch state {
        case .consuming(let consuming): (consuming.handBack ?? .closing).reason
        case .ended(_, _, let handBack): (handBack ?? .closing).reason
        case .connecting: HandBack.closing.reason
        }
    }

    /// A stop was asked of the session before it ended.
    var stopRequested: Bool {
        switch state {
        case .connecting(let stopRequested): stopRequested
        case .consuming(let consuming): consuming.stopRequested
        case .ended: false
        }
    }

    /// Consuming, and giving its deliveries back because the store has been out for long.
    var isGivingBackForTheStore: Bool {
        if case .consuming(let consuming) = state, case .heldForTheStore = consuming.handBack { true } else { false }
    }

    /// Consuming, and giving its deliveries back because the results are not taken.
    var isGivingBackForTheResults: Bool {
        if case .consuming(let consuming) = state, case .pausedForResults = consuming.handBack { true } else { false }
    }

    /// Consuming, and its consumer's sequence has ended.
    var consumerHasEnded: Bool {
        if case .consuming(let consuming) = state { consuming.consumerEnded } else { false }
    }

    /// The end a consuming session reaches once it holds nothing: after a give-back, a stop or its consumer's end.
    /// Nil when it goes on (or is not consuming).
    var endOnceEmpty: SessionEnd? {
        guard case .consuming(let consuming) = state else { return nil }
        if case .heldForTheStore = consuming.handBack { return .pausedForStore }
        if case .pausedForResults = consuming.handBack { return .pausedForResults }
        if consuming.stopRequested, consuming.handBack != nil || consuming.consumerEnded { return .stopped }
        if consuming.consumerEnded { return .consumerEnded }
        return nil
    }

    // MARK: - Inputs

    /// The consumer is open. A session stopped while it connected takes nothing. Ignored once the session has
    /// ended (its connection failed as it opened); a session cannot start twice.
    mutating func started() {
        switch state {
        case .connecting(let stopRequested):
            state = .consuming(Consuming(stopRequested: stopRequested, handBack: stopRequested ? .stopping : nil))
        case .consuming:
            assertionFailure("a session started twice")
        case .ended:
            break
        }
    }

    /// The consumer's sequence ended. Ignored once the session has ended (a late report of the same end).
    mutating func consumerEnded() {
        guard case .consuming(var consuming) = state else { return }
        consuming.consumerEnded = true
        state = .consuming(consuming)
    }

    /// The consumer is to be cancelled: true the first time, while its sequence has not ended (one `basic.cancel`
    /// per consumer, whether a stop or a pause asks for it).
    mutating func requestCancel() -> Bool {
        guard case .consuming(var consuming) = state, !consuming.consumerEnded, !consuming.cancelRequested else {
            return false
        }
        consuming.cancelRequested = true
        state = .consuming(consuming)
        return true
    }

    /// The worker asks the session to stop. True when the stop must be applied now: the session consumes and was
    /// not asked before. A connecting session remembers it for `started`; an ended one has nothing to stop.
    mutating func requestStop() -> Bool {
        switch state {
        case .connecting:
            state = .connecting(stopRequested: true)
            return false
        case .consuming(var consuming):
            guard !consuming.stopRequested else { return false }
            consuming.stopRequested = true
            state = .consuming(consuming)
            return true
        case .ended:
            return false
        }
    }

    /// The session takes nothing more, for `reason`. The first specific reason stays: a stop during a give-back
    /// for the store is still that give-back (and pauses the pipeline); only `.closing` gives way to another.
    mutating func takeNoMore(_ reason: HandBack = .closing) {
        guard case .consuming(var consuming) = state else { return }
        switch consuming.handBack {
        case nil, .closing?: consuming.handBack = reason
        default: break
        }
        state = .consuming(consuming)
    }

    /// `endSession` is sent with `end`.
    mutating func end(_ end: SessionEnd) {
        switch state {
        case .connecting: state = .ended(end, wasConsuming: false, handBack: nil)
        case .consuming(let consuming): state = .ended(end, wasConsuming: true, handBack: consuming.handBack)
        case .ended: assertionFailure("a session ended twice: \(state), then \(end)")
        }
    }
}

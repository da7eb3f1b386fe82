/// Decides whether the results' side has failed for every message or for one: the rule that pauses the worker
/// instead of retrying and dead-lettering a whole downstream redeploy's traffic (issue 36; CONTRACT.md §8).
///
/// It watches each delivery's first publish of its results, over a sliding `window`:
///
/// - a failure the broker gives for a route, not for a body (a result returned `NO_ROUTE`, a nack), counts against
///   the results; a result AMQP cannot encode is the message's own and is not counted here;
/// - it trips when at least `activation` distinct messages failed in the window *and* the failures are at least
///   `tripRatio` of the deliveries published in it. One message retried again and again is one message: it never
///   trips it (MassTransit's kill switch counts attempts, so one poison message can). A route of its own that no
///   queue binds, among others that route, stays under the ratio;
/// - a confirm that does not come in time trips it at once: a broker that confirms nothing (a disk alarm, a blocked
///   connection) fails every message, and waiting for the activation count would only retry more of them.
///
/// - a message refused on its **last attempt** is dead-lettered only while the results go through for others
///   (`lastAttemptRefused`): when other messages were refused too (`quietActivation` distinct ones, itself included,
///   since results were last taken) and no delivery's results were taken since its first attempt could have been,
///   the rule trips. At a few messages a minute (a quiet night), a downstream outage never reaches the activation
///   count in the window, and the retries would otherwise dead-letter every message. A message alone, its own route
///   missing or everyone's, is dead-lettered: nothing tells the two apart.
///
/// Pure and cheap on the hot path: successes are counts in one-second buckets; only failures keep their message's
/// key (one per refusal, in its bucket), and they are rare until they are not.
struct ResultsKillSwitch: Sendable {
    struct Settings: Sendable, Equatable {
        /// How far back the rule looks. Default: 10 s.
        var window: Duration = .seconds(10)
        /// Distinct messages that must have failed in the window before the ratio is looked at. Default: 10.
        var activation = 10
        /// The share of the window's deliveries that must have failed. Default: 0.5.
        var tripRatio = 0.5
        /// Distinct messages refused since results were last taken, a message on its last attempt included, before
        /// its refusal pauses instead of dead-lettering it; 0: never. Default: 2.
        var quietActivation = 2
    }

    /// One delivery's first publish of its results, as the rule sees it.
    enum Outcome: Sendable, Equatable {
        /// Every result it depends on was confirmed.
        case delivered
        /// The broker returned or nacked a result, on `exchange`.
        case refused(exchange: String, reason: String)
        /// The broker confirmed nothing in time.
        case confirmTimedOut(reason: String)
    }

    /// What the rule concludes from one outcome.
    enum Verdict: Sendable, Equatable {
        /// Nothing every message meets: a failure is handled per message (retried, then dead-lettered).
        case holds
        /// The results' side is out: pause. `cause` says why, for the log line, readiness and the runbook.
        case trips(cause: String)
    }

    let settings: Settings
    private var buckets: [Bucket] = []
    /// The window's totals, kept as buckets come and go: a verdict is O(1).
    private var delivered = 0
    private var refused = 0
    /// How many of the window's refusals each message key has.
    private var refusalsByKey: [String: Int] = [:]
    /// Numbers the refusals of messages without an id, each its own key.
    private var anonymous = 0
    /// When a delivery's results were last all taken: the evidence that results route, which a pause does not
    /// forget (its age says how much it proves).
    private(set) var lastTaken: Duration?
    /// Distinct messages refused since results were last taken, up to `quietActivation` of them (in a trial too).
    private(set) var refusedSinceTaken: Set<String> = []

    private struct Bucket: Sendable {
        /// Whole seconds of `now` (the bucket's start).
        var second: Int64
        var delivered = 0
        /// The keys of the messages refused in this second, one per refusal.
        var refusedKeys: [String] = []
        /// The last refusal's exchange and reason, for the cause.
        var lastRefusal: Refusal?
    }

    private struct Refusal: Sendable {
        var exchange: String
        var reason: String
    }

    init(settings: Settings = Settings()) {
        precondition(settings.window >= .seconds(1), "the kill switch's window must be at least 1 s")
        precondition(settings.activation >= 1, "the kill switch's activation count must be at least 1")
        precondition(
            settings.tripRatio > 0 && settings.tripRatio <= 1, "the kill switch's trip ratio must be in (0, 1]")
        precondition(settings.quietActivation >= 0, "the kill switch's quiet activation count must not be negative")
        self.settings = settings
    }

    /// Records one delivery's outcome at `now`. `key` names its message (its `message_id`); nil when it has none,
    /// then it counts as a message of its own.
    mutating func record(_ outcome: Outcome, key: String?, now: Duration) -> Verdict {
        let last = bucket(at: now)
        switch outcome {
        case .delivered:
            buckets[last].delivered += 1
            delivered += 1
            taken(now: now)
            return .holds
        case .confirmTimedOut(let reason):
            return .trips(cause: "the broker confirmed no result in time: \(reason)")
        case .refused(let exchange, let reason):
            let messageKey: String
            if let key {
                messageKey = key
            } else {
                anonymous += 1
                messageKey = "\u{0}without an id \(anonymous)"
            }
            buckets[last].refusedKeys.append(messageKey)
            buckets[last].lastRefusal = Refusal(exchange: exchange, reason: reason)
            refused += 1
            refusalsByKey[messageKey, default: 0] += 1
            // A message without an id cannot be told apart across its retries: it does not count toward the quiet
            // rule, where one message refused five times would otherwise be five.
            if let key { noteRefused(key: key) }
            return verdict()
        }
    }

    /// Records `count` deliveries whose results were all confirmed, at `now`: the hot path's form of `record`.
    mutating func recordDelivered(_ count: Int, now: Duration) {
        guard count > 0 else { return }
        buckets[bucket(at: now)].delivered += count
        delivered += count
        taken(now: now)
    }

    private mutating func taken(now: Duration) {
        lastTaken = now
        if !refusedSinceTaken.isEmpty { refusedSinceTaken = [] }
    }

    /// A message's results were refused where the window does not look (in a trial, or paused): kept for
    /// `lastAttemptRefused`. Only messages with an id.
    mutating func noteRefused(key: String) {
        if refusedSinceTaken.count < settings.quietActivation { refusedSinceTaken.insert(key) }
    }

    /// A message's results were refused on its last attempt (`key`, recorded or noted first): a dead letter unless
    /// `quietActivation` distinct messages, itself included, were refused since results were last taken and none
    /// were taken within `horizon` before `now` (the least time since the message's first attempt, or the window
    /// when that is longer; with `takenAfter`, only a result taken after it counts). Then its failure is everyone's as
    /// far as anything shows: the rule trips. A message without an id counts as itself, once.
    func lastAttemptRefused(
        key: String?, attempts: Int, reason: String, takenAfter: Duration? = nil, horizon: Duration, now: Duration
    ) -> Verdict {
        guard settings.quietActivation > 0 else { return .holds }
        let lookingBack = max(horizon, settings.window)
        if let lastTaken, now - lastTaken <= lookingBack, takenAfter.map({ lastTaken > $0 }) ?? true {
            return .holds
        }
        let refused = key.map { refusedSinceTaken.union([$0]).count } ?? refusedSinceTaken.count + 1
        guard refused >= settings.quietActivation else { return .holds }
        let message = key.map { "message '\($0)'" } ?? "a message without an id"
        let seconds = lookingBack.components.seconds
        return .trips(
            cause: """
                the results of \(message) refused on its last attempt (\(attempts)), \(refused) distinct \
                messages refused and no delivery's results taken in the last \(seconds) s: \(reason)
                """)
    }

    /// Starts afresh: after a pause, what failed before it says nothing about the dependency now. When results were
    /// last taken, and what was refused since, stay: they are what a last attempt is judged by.
    mutating func reset() {
        buckets = []
        delivered = 0
        refused = 0
        refusalsByKey = [:]
    }

    /// The index of `now`'s bucket, once the buckets that left the window are forgotten.
    private mutating func bucket(at now: Duration) -> Int {
        let second = now.components.seconds
        forget(before: second - settings.window.components.seconds + 1)
        if buckets.last?.second != second { buckets.append(Bucket(second: second)) }
        return buckets.count - 1
    }

    /// Drops the buckets older than `oldest` (whole seconds) from the window and its totals.
    private mutating func forget(before oldest: Int64) {
        var expired = 0
        while expired < buckets.count, buckets[expired].second < oldest {
            let bucket = buckets[expired]
            delivered -= bucket.delivered
            refused -= bucket.refusedKeys.count
            for key in bucket.refusedKeys {
                let left = refusalsByKey[key, default: 1] - 1
                refusalsByKey[key] = left > 0 ? left : nil
            }
            expired += 1
        }
        if expired > 0 { buckets.removeFirst(expired) }
    }

    private func verdict() -> Verdict {
        guard refusalsByKey.count >= settings.activation,
            Double(refused) >= settings.tripRatio * Double(refused + delivered),
            let last = buckets.last(where: { $0.lastRefusal != nil })?.lastRefusal
        else { return .holds }
        let seconds = settings.window.components.seconds
        return .trips(
            cause: """
                \(refused) of \(refused + delivered) deliveries' results refused in the last \(seconds) s \
                (\(refusalsByKey.count) distinct messages), the last by exchange '\(last.exchange)': \(last.reason)
                """)
    }
}

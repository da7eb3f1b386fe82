/// How long a message waits after each transient failure of its own: exponential, with jitter.
///
/// The broker does the waiting: a retry copy goes to a retry queue whose `x-message-ttl` dead-letters it back to the
/// queue it came from. One queue per level, because a queue expires messages only at its head: a long wait and a
/// short one in the same queue would make the short one wait the long one's time.
///
/// - Level 1 is CONTRACT.md §1's retry queue (`wallet.notifications.retry`, TTL = `--retry-delay`): the first
///   retry waits exactly the retry delay.
/// - Level `n` (from 2) is `<retry queue>.<n>`, TTL = retry delay × 2^(n-1), at most `--retry-delay-max`; each copy
///   carries an `expiration` drawn uniformly from the upper half of that TTL, so the messages of one failed
///   batch do not come back in step. Ahead of it in its queue are only copies with the same TTL, so a copy
///   waits between its own expiration and the TTL.
/// - Attempts past the first capped level share that level's queue.
public struct RetrySchedule: Sendable, Hashable {
    /// The first retry's wait: level 1's TTL.
    public var firstDelay: Duration
    /// The longest wait of any level.
    public var longestDelay: Duration
    /// Processing attempts in all: the last failure dead-letters the message instead of retrying it.
    public var attempts: Int

    public init(firstDelay: Duration, longestDelay: Duration, attempts: Int) {
        self.firstDelay = firstDelay
        self.longestDelay = max(longestDelay, firstDelay)
        self.attempts = attempts
    }

    /// The levels a message can reach: one per retry (`attempts - 1`), but none past the first whose TTL is
    /// `longestDelay`; at least 1 (level 1 is declared even when nothing is retried, as the contract lists it).
    public var levels: Int {
        var level = 1
        while level < attempts - 1, ttl(level: level) < longestDelay {
            level += 1
        }
        return level
    }

    /// The level of the copy sent after failed attempt `attempt` (1-based).
    public func level(afterAttempt attempt: Int) -> Int {
        min(max(attempt, 1), levels)
    }

    /// Level `level`'s queue TTL: the retry delay doubled per level, at most `longestDelay`.
    public func ttl(level: Int) -> Duration {
        let doublings = min(max(level - 1, 0), 40)
        let milliseconds = firstDelay.milliseconds
        guard milliseconds <= longestDelay.milliseconds >> doublings else { return longestDelay }
        return .milliseconds(milliseconds << doublings)
    }

    /// The `expiration` of a copy at `level`, from `fraction` in `0..<1` (a uniform random draw): `nil` on level 1
    /// (the queue's TTL, exact), otherwise in the upper half of the level's TTL.
    public func expiration(level: Int, fraction: Double) -> Duration? {
        guard level > 1 else { return nil }
        let ceiling = ttl(level: level).milliseconds
        let floor = ceiling / 2
        let drawn = floor + Int64((Double(ceiling - floor) * min(max(fraction, 0), 1)).rounded(.down))
        return .milliseconds(min(drawn, ceiling))
    }

    /// The least time a message can have waited in the retry queues before its attempt `attempt` (1-based): each
    /// earlier copy's shortest wait summed (level 1's TTL; a later level's half, the floor of its `expiration`).
    /// Zero for the first attempt. A lower bound: the message also waits in the work queue and at the worker.
    public func shortestWait(beforeAttempt attempt: Int) -> Duration {
        guard attempt > 1 else { return .zero }
        var milliseconds: Int64 = 0
        for failed in 1..<attempt {
            let level = level(afterAttempt: failed)
            let ttl = ttl(level: level).milliseconds
            milliseconds += level > 1 ? ttl / 2 : ttl
        }
        return .milliseconds(milliseconds)
    }

    /// Level `level`'s queue for the level-1 queue `base`: `base` itself, then `base.2`, `base.3`, …
    public static func queue(_ base: String, level: Int) -> String {
        level <= 1 ? base : "\(base).\(level)"
    }

    /// Every level's queue for the level-1 queue `base`, with its TTL.
    public func queues(_ base: String) -> [(name: String, ttl: Duration)] {
        (1...levels).map { (Self.queue(base, level: $0), ttl(level: $0)) }
    }
}

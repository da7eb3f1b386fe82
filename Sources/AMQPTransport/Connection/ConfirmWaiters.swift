/// Who waits for which publisher confirms: one waiter per batch of publishes, its deadline, the batches held while
/// the broker blocks the connection, and the answers each waiter gets (outcomes, a timeout, or a failure).
///
/// `PublisherConfirms` turns the broker's acks, nacks and returns into resolutions of (batch, index); this type
/// collects them per batch and says when a batch is answered. Pure: no C and no I/O, and the clock is injected
/// (as postgres-nio's connection pool takes one), so deadlines are unit-tested without waiting. It returns the
/// answers as `Settlement` values instead of resuming anyone: the connection resumes them once its own
/// bookkeeping is done. Owned by the connection's I/O thread.
struct ConfirmWaiters<Clock: _Concurrency.Clock> where Clock.Duration == Duration {
    /// A publish batch waiting for its confirms.
    struct Waiter {
        var batch: Int
        var channel: UInt16
        var outcomes: [AMQPPublishOutcome?]
        var remaining: Int
        var deadline: Clock.Instant
        var pending: AMQPPendingConfirms

        /// Records the outcome of the publish at `index` (the first one reported wins); true once all are settled.
        mutating func settle(_ index: Int, with outcome: AMQPPublishOutcome) -> Bool {
            if outcomes[index] == nil {
                outcomes[index] = outcome
                remaining -= 1
            }
            return remaining == 0
        }
    }

    /// A publish batch held while the connection is blocked (its waiter is registered already).
    struct HeldBatch {
        var batch: Int
        var channel: UInt16
        var messages: [AMQPOutboundMessage]
    }

    /// The answer one waiting caller gets. Returned rather than delivered, so the bookkeeping is tested as values.
    struct Settlement {
        var pending: AMQPPendingConfirms
        var result: Result<[AMQPPublishOutcome], AMQPError>

        /// Hands the answer to whoever awaits `pending.outcomes()`.
        func deliver() {
            switch result {
            case .success(let outcomes): pending.resume(returning: outcomes)
            case .failure(let error): pending.resume(throwing: error)
            }
        }
    }

    /// A batch whose deadline passed: its publishes are no longer tracked on `channel`, and its caller gets a timeout.
    struct Expiry {
        var batch: Int
        var channel: UInt16
        var settlement: Settlement
    }

    /// What to do with a batch just registered.
    enum Admission: Equatable {
        /// Send it now: the connection is not blocked.
        case send(batch: Int)
        /// Held until the broker unblocks the connection (a blocked broker stops reading, and a send into a full
        /// socket would stall the I/O thread).
        case held(batch: Int)
    }

    /// Batch id of publishes nobody waits for; real batches start at 1.
    static var unwatchedBatch: Int { 0 }

    let clock: Clock
    /// In batch order (ids only grow). An array, not a dictionary keyed by batch: a confirm settles its waiter in
    /// place through the array's addressor, where a dictionary's `_modify` coroutines allocated eight frames on the
    /// heap per confirm (a third of the worker's allocations, `scripts/profile-worker.sh --allocations`). A
    /// connection has a few batches in flight, so finding one is a short binary search.
    private var waiters: [Waiter] = []
    private var nextBatchID = 1
    /// Set by connection.blocked, cleared by connection.unblocked.
    private(set) var isBlocked = false
    private var heldBatches: [HeldBatch] = []

    init(clock: Clock) {
        self.clock = clock
    }

    var isEmpty: Bool { waiters.isEmpty }

    func isWaiting(batch: Int) -> Bool { position(of: batch) != nil }

    /// Where `batch`'s waiter is in `waiters`, if it still waits.
    private func position(of batch: Int) -> Int? {
        var low = 0
        var high = waiters.count
        while low < high {
            let middle = (low + high) / 2
            if waiters[middle].batch < batch { low = middle + 1 } else { high = middle }
        }
        return low < waiters.count && waiters[low].batch == batch ? low : nil
    }

    /// Registers a waiter for `messages` (not empty) published on `channel`, answered at the latest `timeout` from now.
    mutating func admit(
        _ messages: [AMQPOutboundMessage], channel: UInt16, timeout: Duration, pending: AMQPPendingConfirms
    ) -> Admission {
        let batch = nextBatchID
        nextBatchID += 1
        waiters.append(
            Waiter(
                batch: batch, channel: channel, outcomes: Array(repeating: nil, count: messages.count),
                remaining: messages.count,
                deadline: clock.now.advanced(by: timeout), pending: pending
            ))
        guard isBlocked else { return .send(batch: batch) }
        heldBatches.append(HeldBatch(batch: batch, channel: channel, messages: messages))
        return .held(batch: batch)
    }

    mutating func block() {
        isBlocked = true
    }

    /// Ends the block and returns the held batches in the order they were published, for the caller to send (those
    /// that stopped waiting meanwhile are skipped by checking `isWaiting(batch:)` as it goes).
    mutating func unblock() -> [HeldBatch] {
        isBlocked = false
        defer { heldBatches.removeAll() }
        return heldBatches
    }

    /// Records the resolved publishes; returns an answer for every batch now wholly resolved.
    mutating func resolve(_ resolutions: [PublisherConfirms.Resolution]) -> [Settlement] {
        var settled: [Settlement] = []
        for resolution in resolutions {
            // Settled in place: a copy of the waiter would copy its outcomes for every confirm, quadratic in the
            // batch's size.
            guard let position = position(of: resolution.batch),
                waiters[position].settle(resolution.index, with: resolution.outcome)
            else { continue }
            let waiter = waiters.remove(at: position)
            settled.append(Settlement(pending: waiter.pending, result: .success(waiter.outcomes.map { $0! })))
        }
        return settled
    }

    /// The connection failed: every waiter gets `error`, and nothing held will be sent.
    mutating func failAll(_ error: AMQPError) -> [Settlement] {
        defer {
            waiters.removeAll()
            heldBatches.removeAll()
        }
        return waiters.map { Settlement(pending: $0.pending, result: .failure(error)) }
    }

    /// One channel closed: its waiters get `error`, and its held batches are dropped.
    mutating func failChannel(_ number: UInt16, _ error: AMQPError) -> [Settlement] {
        let settled = waiters.filter { $0.channel == number }.map {
            Settlement(pending: $0.pending, result: .failure(error))
        }
        waiters.removeAll { $0.channel == number }
        heldBatches.removeAll { $0.channel == number }
        return settled
    }

    /// Removes every waiter whose deadline has passed (and its held batch, if any).
    mutating func expireOverdue() -> [Expiry] {
        guard !waiters.isEmpty else { return [] }
        let now = clock.now
        var expired: [Expiry] = []
        for waiter in waiters where waiter.deadline <= now {
            let batch = waiter.batch
            heldBatches.removeAll { $0.batch == batch }
            let error = AMQPError(
                code: .timeout,
                message: "\(waiter.remaining) of \(waiter.outcomes.count) publishes were not confirmed in time")
            expired.append(
                Expiry(
                    batch: batch, channel: waiter.channel,
                    settlement: Settlement(pending: waiter.pending, result: .failure(error))))
        }
        waiters.removeAll { $0.deadline <= now }
        return expired
    }

    /// How long until the next deadline, at most `limit` (zero when one has passed): how long the I/O thread may sleep.
    func timeUntilNextDeadline(atMost limit: Duration) -> Duration {
        let now = clock.now
        var timeout = limit
        for waiter in waiters { timeout = min(timeout, max(.zero, now.duration(to: waiter.deadline))) }
        return timeout
    }
}

import Foundation
import Synchronization
import TestSupport
import WalletRouting
import WalletStore

/// The in-memory store with a switch: while `outage` is set, every call fails with it, as a database that does
/// not answer would. Counts the checks the worker makes.
final class ScriptedStore: WalletStore {
    private let inner = InMemoryWalletStore()
    private let state = Mutex<(outage: StoreError?, checks: Int, batches: Int, failNextBatches: [StoreError])>(
        (nil, 0, 0, []))
    /// Tests waiting for the worker's store checks (their count).
    private let checkWaiters = ConditionWaiters<Int>()

    /// Waits until the worker has checked the store `count` times in all (each probe is one check).
    func waitForChecks(_ count: Int) async {
        await checkWaiters.wait(until: { $0 >= count }) { checks }
    }

    /// Checks held until the test answers them (`answerHeldChecks`), when `holdsChecks`.
    private let heldChecks = Mutex<(holds: Bool, waiting: [CheckedContinuation<HeldCheck, Never>])>((false, []))

    enum HeldCheck {
        case notHeld
        case answered(StoreError?)
    }

    /// Tests waiting for a check to be held (the number held).
    private let heldCheckWaiters = ConditionWaiters<Int>()

    /// Waits until a check is held.
    func waitForHeldCheck() async {
        await heldCheckWaiters.wait(until: { $0 > 0 }) { heldChecks.withLock { $0.waiting.count } }
    }

    /// From now on, each check waits for `answerHeldChecks`.
    func holdChecks() {
        heldChecks.withLock { $0.holds = true }
    }

    /// Answers every held check with `failure` (nil: passed) and stops holding them.
    func answerHeldChecks(_ failure: StoreError?) {
        let waiting = heldChecks.withLock { held in
            defer { held = (false, []) }
            return held.waiting
        }
        for check in waiting { check.resume(returning: .answered(failure)) }
    }

    /// Takes the store out (or, with nil, brings it back).
    func setOutage(_ error: StoreError?) {
        state.withLock { $0.outage = error }
    }

    /// The next batches fail with these errors, in order, whatever the outage switch says.
    func failNextBatches(_ errors: [StoreError]) {
        state.withLock { $0.failNextBatches += errors }
    }

    var checks: Int { state.withLock { $0.checks } }
    var batches: Int { state.withLock { $0.batches } }

    static let unreachable = StoreError(.transient, "scripted: the database does not answer", outage: true)

    func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        let failure = state.withLock { state -> StoreError? in
            state.batches += 1
            if !state.failNextBatches.isEmpty { return state.failNextBatches.removeFirst() }
            return state.outage
        }
        if let failure { throw failure }
        return try await inner.process(messages, router: router, now: now)
    }

    func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await inner.dryRun(messages, router: router, now: now)
    }

    func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        if let outage = state.withLock({ $0.outage }) { throw outage }
        return try await inner.expireProcessedMessages(recordedBefore: cutoff)
    }

    /// Tests waiting for the worker's notes of delivered and undelivered results (their count).
    private let noteWaiters = ConditionWaiters<Int>()
    private let notes = Mutex<[ResultDeliveryNote]>([])

    /// Waits until the worker has made `count` notes of recorded results in all.
    func waitForNotes(_ count: Int) async {
        await noteWaiters.wait(until: { $0 >= count }) { notes.withLock { $0.count } }
    }

    /// The note of `messageID`'s results as undelivered, as the store keeps it.
    func undeliveredResults(_ messageID: String) -> UndeliveredResults? { inner.undeliveredResults(messageID) }

    func noteResultDelivery(_ note: ResultDeliveryNote) async throws(StoreError) {
        if let outage = state.withLock({ $0.outage }) { throw outage }
        try await inner.noteResultDelivery(note)
        let count = notes.withLock { notes in
            notes.append(note)
            return notes.count
        }
        noteWaiters.changed(count)
    }

    func checkAvailable() async throws(StoreError) {
        let held = await withCheckedContinuation { (continuation: CheckedContinuation<HeldCheck, Never>) in
            let holding = heldChecks.withLock { held -> Int? in
                guard held.holds else { return nil }
                held.waiting.append(continuation)
                return held.waiting.count
            }
            if let holding {
                heldCheckWaiters.changed(holding)
            } else {
                continuation.resume(returning: .notHeld)
            }
        }
        if case .answered(let failure) = held {
            let checks = state.withLock { state in
                state.checks += 1
                return state.checks
            }
            checkWaiters.changed(checks)
            if let failure { throw failure }
            return
        }
        let (outage, checks) = state.withLock { state -> (StoreError?, Int) in
            state.checks += 1
            return (state.outage, state.checks)
        }
        checkWaiters.changed(checks)
        if let outage { throw outage }
    }

    func close() async { await inner.close() }
}

import AMQPTransport
import Testing

@testable import WalletWorker

/// Every row of the results' rule (CONTRACT.md §8, docs/contract-decisions.md "A failure every message meets"): a
/// failure that is the message's own is retried and dead-lettered alone; a failure every message meets pauses the
/// worker, gives back what it holds, and dead-letters nothing; a trial finds the results back. The activation count
/// is 3 here (10 by default), so that a row fits in a line.
@Suite("Delivery lifecycle: the results pause") struct DeliveryLifecycleResultsPauseTests {
    typealias H = LifecycleHarness

    /// `pipelines` consuming sessions; with `holdsRefused`, the quorum work queue's way
    /// (`DeliveryLifecycleHeldThroughPauseTests`).
    static func harness(pipelines: Int = 1, shards: Bool = false, holdsRefused: Bool = false) -> H {
        var h = H(
            queues: (0..<pipelines).map {
                ConsumedQueue(name: shards ? "shard.\($0)" : "work.\($0)", retryQueue: "retry", isShard: shards)
            }
        ) {
            $0.resultsKillSwitch = ResultsKillSwitch.Settings(window: .seconds(10), activation: 3, tripRatio: 0.5)
            $0.holdsRefusedThroughAPause = holdsRefused
        }
        h.start()
        for _ in 0..<pipelines { h.started() }
        return h
    }

    /// Pipeline 0's deliveries 1-3 all returned `NO_ROUTE`: the worker paused, the session closed.
    static func paused() -> H {
        var h = harness()
        h.receive([1, 2, 3])
        h.stored()
        h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE"))
        h.closed()
        return h
    }

    // MARK: - Taking results: the message's own failure, or everyone's

    @Test func oneMessagesReturnAmongOthersIsRetriedAloneWithoutAPause() {
        var h = Self.harness()
        h.receive([1, 2, 3, 4, 5])
        h.stored()
        #expect(h.confirmed(returning: [3]) == ["publish 3×1"], "3's retry copy; nothing paused")
        #expect(
            h.confirmed() == ["settle ack ≤5", "1 processed", "2 processed", "3 retried", "4 processed", "5 processed"])
        #expect(!h.machine.isPausedForResults)
        #expect(h.invariants.violations == [])
    }

    @Test func returnsBelowTheActivationCountAreRetriedMessageByMessage() {
        var h = Self.harness()
        h.receive([1, 2])
        h.stored()
        #expect(h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) == ["publish 1×1,2×1"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 retried", "2 retried"])
        #expect(!h.machine.isPausedForResults)
    }

    @Test func theSameMessageReturnedAgainAndAgainIsOneMessage() {
        var h = Self.harness()
        for tag: UInt64 in 1...5 {
            // Each delivery of the same message id (its retry copies coming back).
            let delivery = DeliveryLifecycle.Delivery(
                tag: tag, original: H.original(id: "the-same"), redelivered: false, receivedAt: h.now)
            h.deliveries[tag] = delivery
            h.invariants.received(h.session!, tag)
            _ = h.apply(h.machine.batchReceived(h.session!, [delivery], now: h.now))
            h.stored()
            #expect(h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) == ["publish \(tag)×1"])
            #expect(h.confirmed() == ["settle ack \(tag)", "\(tag) retried"])
        }
        #expect(!h.machine.isPausedForResults)
    }

    @Test(
        "every message's results returned, or nacked, pause the worker: everything is given back, nothing retried",
        arguments: [
            AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE"), AMQPPublishOutcome.nacked,
        ])
    func everyMessageRefusedPauses(_ outcome: AMQPPublishOutcome) {
        var h = Self.harness()
        h.receive([1, 2, 3])
        h.stored()
        h.receive([4])
        #expect(
            h.confirmed(outcome) == [
                "paused for the results", "timer results trial", "1 requeued", "2 requeued", "3 requeued",
            ])
        #expect(h.machine.isPausedForResults)
        // 4 is at the store: committed, its results go out; refused too, it goes back with the rest.
        #expect(h.stored() == ["publish 4×1"])
        #expect(h.confirmed(outcome) == ["4 requeued", "end session paused for the results"])
        #expect(h.closed() == [], "no session until the trial")
        #expect(h.connects.isEmpty)
        #expect(h.invariants.violations == [])
    }

    @Test func aBatchAtTheStoreWhenThePauseBeginsFinishesAndGivesBackWhatWasRefused() {
        var h = Self.harness(pipelines: 2)
        h.session = DeliveryLifecycle.SessionID(pipeline: 1, number: 1)
        h.receive([11, 12])
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        h.receive([1, 2, 3])
        // Pipeline 1's batch is at the store; pipeline 0's is answered first and trips the switch.
        let first = h.stores.removeFirst()
        h.stores.append(first)
        h.stored()
        #expect(
            h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")).prefix(2) == [
                "paused for the results", "timer results trial",
            ])
        #expect(h.stored() == ["publish 11×1,12×1"], "committed: its results go out")
        #expect(
            h.confirmed(returning: [12]) == [
                "settle ack 11", "11 processed", "12 requeued", "end session paused for the results",
            ])
        #expect(h.invariants.violations == [])
    }

    @Test func aConfirmTimeoutPausesAtOnce() {
        var h = Self.harness()
        h.receive([1])
        h.stored()
        #expect(h.confirmsTimedOut().first == "paused for the results")
    }

    // MARK: - Paused: the trial

    @Test func aTrialThatFindsTheResultsTakenResumesAndCountsWhatWasGivenBack() {
        var h = Self.paused()
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "connect 0.2"])
        h.started()
        h.receive([1, 2, 3])
        h.stored()
        #expect(
            h.confirmed() == ["settle ack ≤3", "1 processed", "2 processed", "3 processed", "resumed, gave back 3"])
        #expect(!h.machine.isPausedForResults)
        #expect(h.fire("trial deadline") == [], "the trial's deadline is stale once it resumed")
    }

    @Test func aTrialThatFailsPausesAgainWithALongerWaitAndTheNextOnePasses() {
        var h = Self.paused()
        h.fire("results trial")
        h.started()
        h.receive([1, 2, 3])
        h.stored()
        #expect(
            h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) == [
                "trial 1 failed: paused for the results", "timer results trial", "1 requeued", "2 requeued",
                "3 requeued", "end session paused for the results",
            ])
        h.closed()
        let delays = h.delays("results trial")
        #expect(delays.count == 2)
        #expect(delays[0] <= .seconds(5) && delays[1] >= .seconds(5) && delays[1] <= .seconds(10))
        h.fire("results trial")
        h.started()
        h.receive([1, 2, 3])
        h.stored()
        #expect(h.confirmed().last == "resumed, gave back 6")
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialHoldsARefusedMessageForItsVerdictAndRetriesItAloneWhenOthersAreTaken() {
        var h = Self.paused()
        h.fire("results trial")
        h.started()
        h.receive([1])
        h.stored()
        #expect(h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) == [], "held: no retry, no pause yet")
        h.receive([2])
        h.stored()
        #expect(h.confirmed() == ["settle ack 2", "2 processed", "resumed, gave back 3", "publish 1×1"])
        #expect(h.confirmed() == ["settle ack 1", "1 retried"])
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialWithoutAVerdictInItsWindowResumes() {
        var h = Self.paused()
        h.fire("results trial")
        h.started()
        h.receive([1])
        h.stored()
        #expect(h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) == [])
        // One message's own route, alone in the queue: it must not keep the worker paused.
        #expect(h.fire("trial deadline", advance: .seconds(10)) == ["resumed, gave back 3", "publish 1×1"])
        #expect(h.confirmed() == ["settle ack 1", "1 retried"])
    }

    @Test func aConfirmTimeoutInATrialPausesAgain() {
        var h = Self.paused()
        h.fire("results trial")
        h.started()
        h.receive([1])
        h.stored()
        #expect(h.confirmsTimedOut().first == "trial 1 failed: paused for the results")
    }

    // MARK: - Stopping

    @Test func aStopWhilePausedStopsThePipelineAndNoTrialFollows() {
        var h = Self.paused()
        #expect(h.stop() == ["stop pipeline 0"])
        #expect(h.fire("results trial") == [])
        #expect(h.connects.isEmpty)
    }

    @Test func aStopDuringATrialGivesBackWhatIsHeldForItsVerdict() {
        var h = Self.paused()
        h.fire("results trial")
        h.started()
        h.receive([1])
        h.stored()
        h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE"))
        #expect(h.stop() == ["1 requeued", "cancel consumer", "end session stopped"])
        #expect(h.invariants.violations == [])
    }

    @Test func aSessionThatConnectsWhilePausedTakesNothing() {
        var h = Self.harness(pipelines: 2)
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        h.receive([1, 2, 3])
        h.stored()
        h.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE"))
        // Pipeline 1 held nothing: it ends too, and waits for the trial.
        #expect(h.endedSessions.count == 2)
        h.closed()
        h.closed()
        #expect(h.connects.isEmpty)
        h.fire("results trial")
        #expect(h.connects.count == 2)
    }
}

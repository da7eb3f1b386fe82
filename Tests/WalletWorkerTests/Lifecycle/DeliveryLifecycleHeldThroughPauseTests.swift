import AMQPTransport
import Testing

@testable import WalletWorker

/// The results pause on a quorum work queue (`holdsRefusedThroughAPause`): the broker counts every give-back toward
/// the queue's delivery limit, so a pause that gave back what it holds at each failed trial would have the broker
/// dead-letter the messages at the head of the queue after `--delivery-limit` trials (about 17 minutes with the
/// defaults). Here the refused deliveries are held through the pause instead, their recorded results published again
/// at each trial, and given back only before the broker's consumer timeout (`giveBackAfter`, 60 s in the harness).
/// The classic queue's rows, where the pause gives back everything, are `DeliveryLifecycleResultsPauseTests`.
@Suite("Delivery lifecycle: refused deliveries held through a results pause")
struct DeliveryLifecycleHeldThroughPauseTests {
    typealias H = LifecycleHarness
    static let noRoute = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")

    static func harness(pipelines: Int = 1, shards: Bool = false) -> H {
        DeliveryLifecycleResultsPauseTests.harness(pipelines: pipelines, shards: shards, holdsRefused: true)
    }

    /// Deliveries 1-3 all returned `NO_ROUTE`: paused, the three held.
    static func holding() -> H {
        var h = harness()
        h.receive([1, 2, 3])
        h.stored()
        h.confirmed(Self.noRoute)
        return h
    }

    @Test func thePauseHoldsTheRefusedDeliveriesAndTakesNoMore() {
        var h = Self.harness()
        h.receive([1, 2, 3])
        h.stored()
        h.receive([4])
        h.receive([5])
        #expect(
            h.confirmed(Self.noRoute) == [
                "paused for the results", "timer results trial", "5 requeued", "cancel consumer",
                "timer give back held results",
            ], "5 had nothing committed: it goes back with the channel's close; 1-3 are held, unsettled")
        #expect(h.machine.isPausedForResults)
        #expect(h.endedSessions.isEmpty, "the session stays open for what it holds")
        #expect(h.delays("give back held results") == [.seconds(60)])
        // 4 was at the store: committed, its results go out, and refused it is held with the rest.
        #expect(h.stored() == ["publish 4×1"])
        #expect(h.confirmed(Self.noRoute) == [])
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1", "publish 4×1"])
        #expect(h.invariants.violations == [])
    }

    @Test func aBatchPublishedBeforeThePauseKeepsWhatWasTakenAndHoldsWhatWasRefused() {
        var h = Self.harness()
        h.receive([1, 2, 3])
        h.stored()
        h.receive([4, 5])
        h.stored()
        h.confirmed(Self.noRoute)
        #expect(h.confirmed(returning: [5]) == ["settle ack 4", "4 processed"], "5 is held with 1-3")
        #expect(h.endedSessions.isEmpty)
        // The trial publishes both held batches again.
        #expect(
            h.fire("results trial") == [
                "timer trial deadline", "trial 1", "publish 1×1,2×1,3×1", "publish 5×1",
            ])
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialPublishesTheHeldResultsAgainInsteadOfConsuming() {
        var h = Self.holding()
        #expect(
            h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1"],
            "no connect: what is held is the trial")
        #expect(h.connects.isEmpty)
        // Refused again: paused again, still held; nothing requeued, nothing retried.
        #expect(h.confirmed(Self.noRoute) == ["trial 1 failed: paused for the results", "timer results trial"])
        #expect(h.endedSessions.isEmpty)
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 2", "publish 1×1,2×1,3×1"])
        // Taken: acknowledged, resumed; the session, whose consumer was cancelled, ends and its pipeline connects.
        #expect(
            h.confirmed() == [
                "settle ack ≤3", "1 processed", "2 processed", "3 processed", "resumed, gave back 0",
                "end session paused for the results",
            ])
        #expect(!h.machine.isPausedForResults)
        #expect(h.closed() == ["connect 0.2"])
        #expect(h.invariants.violations == [])
    }

    @Test func aPipelineThatHeldNothingWaitsForTheHeldResultsVerdictThenConnects() {
        var h = Self.harness(pipelines: 2)
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        h.receive([1, 2, 3])
        h.stored()
        h.confirmed(Self.noRoute)
        // Pipeline 1 held nothing: it ended at the pause.
        #expect(h.endedSessions == [DeliveryLifecycle.SessionID(pipeline: 1, number: 1)])
        h.closed()
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1"])
        #expect(h.connects.isEmpty)
        let resumed = h.confirmed()
        #expect(resumed.contains("resumed, gave back 0"))
        #expect(resumed.last == "connect 1.2", "\(resumed)")
        #expect(h.invariants.violations == [])
    }

    @Test func heldForTheGiveBackTimeTheyGoBackBeforeTheConsumerTimeoutAndTheNextTrialConsumes() {
        var h = Self.holding()
        h.fire("results trial", advance: .seconds(5))
        h.confirmed(Self.noRoute)
        #expect(
            h.fire("give back held results", advance: .seconds(55)) == [
                "giving back 3", "1 requeued", "2 requeued", "3 requeued", "end session paused for the results",
            ])
        #expect(h.closed() == [], "paused: the pipeline waits for the next trial")
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 2", "connect 0.2"], "nothing held now")
        #expect(h.invariants.violations == [])
    }

    @Test func theGiveBackTimerIsArmedAgainWhenTheHeldAreYoungerThanTheLimit() {
        var h = Self.holding()
        h.fire("results trial", advance: .seconds(5))
        #expect(h.confirmed().contains("resumed, gave back 0"))
        // The timer of a session that no longer holds anything does nothing.
        #expect(h.fire("give back held results", advance: .seconds(60)) == [])
        #expect(h.invariants.violations == [])
    }

    @Test func fewerHeldThanTheActivationCountStillFailATrial() {
        var h = Self.harness()
        // 1 and 2 are refused below the activation count (3): retried message by message.
        h.receive([1, 2])
        h.stored()
        h.confirmed(Self.noRoute)
        h.confirmed()
        // 3 is the third distinct refusal: paused, and it alone is held.
        h.receive([3])
        h.stored()
        #expect(h.confirmed(Self.noRoute).first == "paused for the results")
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 3×1"])
        #expect(
            h.confirmed(Self.noRoute) == ["trial 1 failed: paused for the results", "timer results trial"],
            "refused again: still out, however few were held")
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialOfHeldResultsWaitsTheConfirmTimeoutPastItsWindow() {
        var h = Self.holding()
        h.fire("results trial")
        #expect(h.delays("trial deadline") == [.seconds(20)], "the window (10 s) and the confirm timeout (10 s)")
    }

    @Test func aHeldDeliveryRefusedAfterTheResultsResumedIsRetriedNotGivenBack() {
        var h = Self.harness(pipelines: 2)
        h.session = DeliveryLifecycle.SessionID(pipeline: 1, number: 1)
        h.receive([11, 12])
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        h.receive([1, 2, 3])
        h.stored()
        h.stored()
        // Pipeline 0's refusals trip the switch; pipeline 1's come in while paused: both hold.
        h.publishes.swapAt(0, 1)
        #expect(h.confirmed(Self.noRoute).first == "paused for the results")
        #expect(
            h.confirmed(Self.noRoute) == ["timer give back held results"], "its consumer was cancelled at the pause")
        #expect(
            h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1", "publish 11×1,12×1"])
        #expect(h.confirmed().contains("resumed, gave back 0"))
        // Pipeline 1's refusal now is its messages' own: their retry copies, as for any message.
        #expect(h.confirmed(returning: [12]) == ["publish 12×1"])
        #expect(
            h.confirmed() == ["settle ack ≤12", "11 processed", "12 retried", "end session paused for the results"])
        #expect(h.invariants.violations == [])
    }

    @Test func aTransientStoreFailureDuringThePauseGivesBackOnlyWhatWasNotCommitted() {
        var h = Self.harness()
        h.receive([1, 2, 3])
        h.stored()
        h.receive([4])
        h.confirmed(Self.noRoute)
        #expect(
            h.storeFails(H.ownFailure) == ["4 requeued"], "1-3 stay held; 4, never committed, goes back with the close")
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1"])
        #expect(h.invariants.violations == [])
    }

    @Test func aSessionThatEndsDuringATrialOfHeldResultsWaitsForItsVerdict() {
        var h = Self.harness(pipelines: 2)
        h.session = DeliveryLifecycle.SessionID(pipeline: 1, number: 1)
        h.receive([11])
        h.session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
        h.receive([1, 2, 3])
        // Pipeline 0's batch is stored first and trips the switch; pipeline 1's is still at the store.
        let first = h.stores.removeFirst()
        h.stores.append(first)
        h.stored()
        h.confirmed(Self.noRoute)
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 1×1,2×1,3×1"])
        // Pipeline 1's batch (a message with no results) settles during the trial: its session ends and waits,
        // consuming nothing beside the trial.
        let settled = h.stored { H.ignored($0) }
        #expect(settled.last == "end session paused for the results", "\(settled)")
        #expect(h.closed() == [])
        #expect(h.connects.isEmpty)
        #expect(h.confirmed().suffix(2) == ["end session paused for the results", "connect 1.2"])
        #expect(h.invariants.violations == [])
    }

    @Test func aSessionThatReconnectsDuringATrialOfHeldResultsTakesNothingUntilItsVerdict() {
        var h = Self.holding()
        h.fire("results trial")
        // The held republish is out when the session fails: the broker has the held deliveries back.
        h.sessionFailed()
        #expect(h.closed().last == "connect 0.2")
        // Connected while the trial is on, it takes nothing: a refusal of its own would count as the trial's.
        #expect(h.started() == ["end session paused for the results"])
        #expect(h.closed() == [])
        // No confirm will come for the dropped republish: the deadline resumes, and the pipeline consumes.
        #expect(h.fire("trial deadline", advance: .seconds(20)) == ["resumed, gave back 0", "connect 0.3"])
        #expect(h.invariants.violations == [])
    }

    @Test func aBatchPublishedBeforeThePauseAndStillUnconfirmedIsTheTrialsEvidenceToo() {
        var h = Self.harness()
        h.receive([1, 2, 3])
        h.stored()
        h.receive([4, 5, 6])
        h.stored()
        // 4-6's refusals trip the switch; 1-3's confirms are late.
        h.publishes.swapAt(0, 1)
        #expect(h.confirmed(Self.noRoute).first == "paused for the results")
        #expect(h.fire("results trial") == ["timer trial deadline", "trial 1", "publish 4×1,5×1,6×1"])
        #expect(h.connects.isEmpty)
        // 1-3's refusal comes during the trial: the same outage, so the trial fails, and they are held too.
        #expect(h.confirmed(Self.noRoute) == ["trial 1 failed: paused for the results", "timer results trial"])
        #expect(h.confirmed(Self.noRoute) == [], "4-6's republish, refused while paused: held again")
        #expect(
            h.fire("results trial") == [
                "timer trial deadline", "trial 2", "publish 1×1,2×1,3×1", "publish 4×1,5×1,6×1",
            ])
        #expect(h.invariants.violations == [])
    }

    @Test func aStopWhileHoldingGivesTheHeldBack() {
        var h = Self.holding()
        #expect(
            h.stop() == ["1 requeued", "2 requeued", "3 requeued", "end session paused for the results"],
            "its consumer was cancelled at the pause")
        #expect(h.closed() == ["stop pipeline 0"])
        #expect(h.fire("results trial") == [])
        #expect(h.invariants.violations == [])
    }

    @Test func aSessionFailureWhileHoldingLeavesTheHeldToTheBroker() {
        var h = Self.holding()
        h.sessionFailed()
        #expect(h.closed().first?.hasPrefix("reconnecting") ?? false)
        // It connects while paused, takes nothing, and waits for the trial.
        #expect(h.started() == ["end session paused for the results"])
        h.closed()
        #expect(h.fire("results trial").last == "connect 0.3")
        #expect(h.invariants.violations == [])
    }

    @Test func aShardKeepsItsConsumerWhileHolding() {
        var h = Self.harness(shards: true)
        h.receive([1, 2, 3])
        h.stored()
        let paused = h.confirmed(Self.noRoute)
        #expect(!paused.contains("cancel consumer"), "cancelled, the shard would go to a standby: \(paused)")
        // What arrives meanwhile is left to the channel's close.
        #expect(h.receive([4]) == ["4 requeued"])
        #expect(h.endedSessions.isEmpty)
        #expect(h.invariants.violations == [])
    }
}

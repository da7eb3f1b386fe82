import AMQPTransport
import Testing
import WalletStore

@testable import WalletWorker

/// The batch lifecycle, input by input: what each input does in each state, as the actions the machine returns.
/// Lines are `LifecycleHarness.summary`: `store 1,2`, `publish 1×1` (a delivery and how many messages it publishes),
/// `settle ack ≤2` (an acknowledgement with `multiple`), `3 processed` (a delivery's fate), `timer probe`.
@Suite("Delivery lifecycle") struct DeliveryLifecycleTests {
    typealias H = LifecycleHarness

    // MARK: - Sessions

    @Test func aPipelineConnectsConsumesAndStoresWhatArrives() {
        var h = H(queues: [ConsumedQueue(name: "work", retryQueue: "retry", isShard: false)])
        #expect(h.start() == ["connect 0.1"])
        #expect(h.started() == [])
        #expect(h.receive([1, 2]) == ["store 1,2"])
        #expect(h.stored() == ["publish 1×1,2×1"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 processed", "2 processed"])
    }

    @Test func batchesArrivingWhileOneIsAtTheStoreWaitThenGoTogether() {
        var h = H.consuming()
        #expect(h.receive([1]) == ["store 1"])
        #expect(h.receive([2, 3]) == [], "one store call at a time")
        #expect(h.receive([4]) == [])
        // Stored and published, batch 1 waits for its confirms while the next batch is stored: the rest, merged.
        #expect(h.stored() == ["publish 1×1", "store 2,3,4"])
        #expect(h.stored() == ["publish 2×1,3×1,4×1"])
        #expect(h.confirmed() == ["settle ack 1", "1 processed"])
        #expect(h.confirmed() == ["settle ack ≤4", "2 processed", "3 processed", "4 processed"])
    }

    @Test func confirmsOutOfOrderAreNeverCoveredByAMultipleAckOfAnEarlierBatch() {
        var h = H.consuming()
        h.receive([1, 2])
        h.stored()
        h.receive([3, 4])
        h.stored()
        // The second batch's confirms come first: its tags are acknowledged one by one, batch 1 is still unsettled.
        let second = h.publishes.removeLast()
        let lines = h.apply(
            h.machine.confirmsArrived(second.session, second.id, .outcomes([.confirmed, .confirmed]), now: h.now))
        #expect(lines == ["settle ack 3, ack 4", "3 processed", "4 processed"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 processed", "2 processed"])
    }

    @Test func aShardTakesTheNextBatchOnlyWhenTheLastIsSettled() {
        var h = H.consuming(shard: true)
        #expect(h.receive([1]) == ["store 1"])
        #expect(h.stored() == ["publish 1×1"])
        #expect(h.receive([2]) == [], "batch 1 is not settled")
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "store 2"])
    }

    @Test func aBatchWithNothingToPublishIsSettledAtOnce() {
        var h = H.consuming()
        h.receive([1, 2])
        #expect(h.stored(H.ignored) == ["settle ack ≤2", "1 processed", "2 processed"])
    }

    @Test func badInputPublishesItsRejectedResultAndItsDeadLetter() {
        var h = H.consuming()
        h.receive([1])
        #expect(h.stored(H.rejected) == ["publish 1×2"])
        #expect(h.confirmed() == ["settle ack 1", "1 rejected"])
    }

    @Test func theNegotiatedFrameSizeShapesDeadLetters() throws {
        // Issue 23, defect 5: a header that fits RabbitMQ's default frame but not the negotiated one. The worker's dead
        // letter used to be fitted to 131,072 bytes whatever the broker agreed to, and the transport then refused it.
        var h = H(queues: [ConsumedQueue(name: "work", retryQueue: "retry", isShard: false)])
        h.start()
        h.started(frameMax: 8_192)
        let big = String(repeating: "x", count: 20_000)
        let session = try #require(h.session)
        var original = H.original(id: "m1")
        original.properties.headers = ["x-big": .string(big), "x-small": .string("s")]
        let delivery = DeliveryLifecycle.Delivery(tag: 1, original: original, redelivered: false, receivedAt: .zero)
        let received = h.machine.batchReceived(session, [delivery], now: .zero)
        let batches = received.compactMap { action -> DeliveryLifecycle.BatchID? in
            if case .store(_, let batch, _, _) = action { batch } else { nil }
        }
        let batch = try #require(batches.first)
        let answered = h.machine.storeAnswered(session, batch, .stored([H.rejected(1)]), now: .zero)
        let published = answered.compactMap { action -> [DeliveryPlan]? in
            if case .publish(_, _, _, let plans) = action { plans } else { nil }
        }
        let plans = try #require(published.first)
        let deadLetter = try #require(plans.first?.messages.last)
        #expect(deadLetter.properties.encodingProblem(frameMax: 8_192) == nil)
        #expect(deadLetter.properties.headers?["x-big"] == nil, "dropped to fit the negotiated frame")
        #expect(deadLetter.properties.headers?["x-worker-dropped-headers"]?.textValue?.contains("x-big") == true)
    }

    // MARK: - The store

    @Test func aTransientFailureIsCheckedRetriedAndAfterThreeChecksThatPassGoesToTheRetryQueue() {
        var h = H.consuming()
        h.receive([1, 2])
        #expect(h.storeFails(H.ownFailure) == ["check store"])
        #expect(h.checked(passes: true) == ["timer retry store"])
        #expect(h.fire("retry store") == ["store 1,2"])
        #expect(h.storeFails(H.ownFailure) == ["check store"])
        #expect(h.checked(passes: true) == ["timer retry store"])
        h.fire("retry store")
        #expect(h.storeFails(H.ownFailure) == ["check store"])
        #expect(h.checked(passes: true) == ["the batch's own failure", "publish 1×1,2×1"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 retried", "2 retried"])
    }

    @Test func aFailedCheckMeansTheStoreIsOut() {
        var h = H.consuming()
        h.receive([1])
        h.storeFails(H.ownFailure)
        #expect(h.checked(passes: false) == ["outage began", "timer probe", "timer give back"])
        #expect(h.machine.isStoreOut)
    }

    /// Issue 23, defect 3: an error that says the whole store is out (a lock held by another process, a read-only
    /// standby, a full disk) holds the batch at once, without a check that might pass.
    @Test func anOutageErrorHoldsTheBatchAtOnceAndTheProbeReleasesIt() {
        var h = H.consuming()
        h.receive([1, 2])
        #expect(h.storeFails(H.outage) == ["outage began", "timer probe", "timer give back"])
        #expect(h.receive([3]) == [], "nothing is stored while the store is out")
        #expect(h.fire("probe") == ["check store"])
        #expect(h.checked(passes: false) == ["timer probe"])
        #expect(h.fire("probe") == ["check store"])
        #expect(h.checked(passes: true) == ["outage ended", "store 1,2"])
        #expect(h.stored() == ["publish 1×1,2×1", "store 3"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 processed", "2 processed"])
    }

    @Test func theStoreRefusingABatchStoresItOneMessageAtATime() {
        var h = H.consuming()
        h.receive([1, 2, 3])
        #expect(h.storeFails(H.refused) == ["one at a time", "store one by one 1,2,3"])
        let lines = h.storeAnswers { tags in
            StoreAnswer(
                outcomes: [
                    .stored(H.processed(tags[0])), .refused(reason: "NUL in text"), .stored(H.processed(tags[2])),
                ],
                failure: nil)
        }
        #expect(lines == ["publish 1×1,2×1,3×1"])
        #expect(h.confirmed() == ["settle ack ≤3", "1 processed", "2 store_refused", "3 processed"])
    }

    @Test func aSingleMessageTheStoreRefusesIsDeadLetteredAtOnce() {
        var h = H.consuming()
        h.receive([1])
        #expect(h.storeFails(H.refused) == ["publish 1×1"])
        #expect(h.confirmed() == ["settle ack 1", "1 store_refused"])
    }

    /// Issue 23, defect 1: stored one at a time, two messages committed before the store failed. They were stored
    /// again (with a second result for those without a message id); now they are published and acknowledged, and
    /// only the rest is checked and retried.
    @Test func onlyTheUncommittedTailOfABatchIsRetried() {
        var h = H.consuming()
        h.receive([1, 2, 3, 4])
        h.storeFails(H.refused)
        let lines = h.storeAnswers { tags in
            StoreAnswer(
                outcomes: [.stored(H.processed(tags[0])), .stored(H.processed(tags[1]))], failure: H.ownFailure)
        }
        #expect(lines == ["publish 1×1,2×1", "check store"])
        #expect(h.confirmed() == ["settle ack ≤2", "1 processed", "2 processed"])
        #expect(h.checked(passes: true) == ["timer retry store"])
        #expect(h.fire("retry store") == ["store 3,4"], "the committed messages are not stored again")
        #expect(h.stored() == ["publish 3×1,4×1"])
        #expect(h.confirmed() == ["settle ack ≤4", "3 processed", "4 processed"])
    }

    @Test func theCommittedPartIsPublishedEvenWhenTheStoreGoesOut() {
        var h = H.consuming()
        h.receive([1, 2, 3])
        h.storeFails(H.refused)
        let lines = h.storeAnswers { tags in StoreAnswer(outcomes: [.stored(H.ignored(tags[0]))], failure: H.outage) }
        #expect(lines == ["settle ack 1", "1 processed", "outage began", "timer probe", "timer give back"])
    }

    @Test func aPermanentStoreFailureFinishesWhatIsCommittedAndStopsTheWorker() {
        var h = H.consuming()
        h.receive([1, 2])
        h.storeFails(H.refused)
        let lines = h.storeAnswers { tags in
            StoreAnswer(outcomes: [.stored(H.processed(tags[0]))], failure: H.permanent)
        }
        #expect(lines == ["publish 1×1", "fail worker", "2 requeued", "cancel consumer"])
        #expect(h.failures.count == 1)
        #expect(h.receive([3]) == ["3 requeued"], "nothing more is stored")
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "end session stopped"])
        #expect(h.closed() == ["stop pipeline 0"])
    }

    // MARK: - Holding for the store, giving back

    /// Issue 23, defect 4: a batch held for the store was never acknowledged, so the broker's consumer timeout closed
    /// the channel, which counted against the messages. Now they are given back before it, and the pipeline pauses.
    @Test func deliveriesHeldTooLongAreGivenBackAndThePipelinePausesUntilTheStoreAnswers() {
        var h = H.consuming()
        h.receive([1, 2])
        h.storeFails(H.outage)
        h.receive([3])
        #expect(
            h.fire("give back", advance: .seconds(60)) == [
                "giving back 3", "1 requeued", "2 requeued", "3 requeued", "end session paused for the store",
            ])
        #expect(h.receive([4]) == ["4 requeued"], "what arrives before the channel closes goes back too")
        #expect(h.closed() == [], "paused: no session until the store answers")
        h.fire("probe")
        #expect(h.checked(passes: true) == ["outage ended", "connect 0.2"])
        #expect(h.started() == [])
        #expect(h.receive([1]) == ["store 1"])
    }

    @Test func theGiveBackWaitsForTheOldestHeldDelivery() {
        var h = H.consuming()
        h.receive([1])
        h.now += .seconds(30)
        #expect(h.storeFails(H.outage) == ["outage began", "timer probe", "timer give back"])
        #expect(h.fire("give back", advance: .seconds(29)) == ["timer give back"], "held 59 s: not yet")
        #expect(h.fire("give back", advance: .seconds(1)).first == "giving back 1")
    }

    @Test func committedBatchesFinishBeforeTheGiveBackEndsTheSession() {
        var h = H.consuming()
        h.receive([1])
        h.stored()
        h.receive([2])
        h.storeFails(H.outage)
        #expect(h.fire("give back", advance: .seconds(60)) == ["giving back 1", "2 requeued"])
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "end session paused for the store"])
    }

    @Test func theStoreAnsweringBeforeTheGiveBackDisarmsIt() {
        var h = H.consuming()
        h.receive([1])
        h.storeFails(H.outage)
        h.fire("probe")
        #expect(h.checked(passes: true) == ["outage ended", "store 1"])
        #expect(h.fire("give back", advance: .seconds(60)) == [])
    }

    // MARK: - Confirms, second publishes, requeues

    @Test func resultsNotTakenSendTheDeliveryToTheRetryQueue() {
        var h = H.consuming()
        h.receive([1, 2])
        h.stored()
        #expect(h.confirmed(.nacked) == ["publish 1×1,2×1"], "the retry copies")
        #expect(h.confirmed() == ["settle ack ≤2", "1 retried", "2 retried"])
    }

    @Test func aConfirmTimeoutPausesForTheResultsAndDeadLettersNothing() {
        var h = H.consuming()
        h.receive([1])
        h.stored()
        #expect(
            h.confirmsTimedOut() == [
                "paused for the results", "timer results trial", "1 requeued", "end session paused for the results",
            ])
        #expect(h.closed() == [], "the pipeline waits for the trial")
        #expect(h.invariants.violations == [])
    }

    @Test func anUnencodableResultDeadLettersAtOnce() {
        var h = H.consuming()
        h.receive([1])
        h.stored()
        #expect(h.confirmed(.unencodable(reason: "short string over 255 bytes")) == ["publish 1×1"])
        // Its effects were committed and its result went nowhere: the store notes it for `inspect message`.
        #expect(h.confirmed() == ["settle ack 1", "1 unpublishable", "note m1 undelivered (unpublishable)"])
    }

    /// A replay whose recorded results were taken delivered them: any note of them as undelivered goes.
    @Test func aReplayWhoseResultsAreTakenIsNotedAsDelivered() {
        var h = H.consuming()
        h.receive([1, 2])
        h.stored { tag in
            var decision = H.processed(tag)
            decision.isReplay = tag == 1
            return decision
        }
        #expect(h.confirmed() == ["settle ack ≤2", "1 processed", "2 processed", "note m1 delivered"])
    }

    /// Issue 23, defect 2: the deliveries whose retry copies were confirmed are acknowledged before the requeue delay
    /// of the others, so a shutdown during the delay leaves no message both in the queue and in the retry queue.
    @Test func confirmedCopiesAreAcknowledgedBeforeTheRequeueDelay() {
        var h = H.consuming()
        h.receive([1, 2])
        h.stored()
        h.confirmed(.nacked)
        let second = h.publishes.removeFirst()
        let lines = h.apply(
            h.machine.confirmsArrived(second.session, second.id, .outcomes([.confirmed, .nacked]), now: h.now))
        #expect(lines == ["settle ack 1", "1 retried", "requeue delayed 1", "timer requeue"])
        #expect(h.stop() == ["cancel consumer", "settle requeue 2", "2 requeued"], "stopping ends the delay")
        #expect(h.consumerEnded() == ["end session stopped"])
    }

    @Test func theRequeueDelayGrowsAndResets() {
        var h = H.consuming()
        for tag: UInt64 in [1, 2, 3] {
            h.receive([tag])
            h.stored()
            h.confirmed(.nacked)
            #expect(h.confirmed(.nacked) == ["requeue delayed 1", "timer requeue"])
            #expect(h.fire("requeue") == ["settle requeue \(tag)", "\(tag) requeued"])
        }
        #expect(h.delays("requeue") == [.seconds(1), .seconds(2), .seconds(4)])
        h.receive([4])
        h.stored()
        h.confirmed()
        h.receive([5])
        h.stored()
        h.confirmed(.nacked)
        h.confirmed(.nacked)
        #expect(h.delays("requeue").last == .seconds(1), "back to the first delay after a batch that needed none")
    }

    // MARK: - Stopping

    @Test func aStopCancelsTheConsumerAndFinishesEverythingReceived() {
        var h = H.consuming()
        h.receive([1])
        #expect(h.stop() == ["cancel consumer"])
        #expect(h.receive([2]) == [], "in transit before the cancel: processed too")
        #expect(h.stored() == ["publish 1×1", "store 2"])
        #expect(h.consumerEnded() == [])
        #expect(h.confirmed() == ["settle ack 1", "1 processed"])
        #expect(h.stored() == ["publish 2×1"])
        #expect(h.confirmed() == ["settle ack 2", "2 processed", "end session stopped"])
    }

    @Test func aStoppedWorkQueueSessionEndsWhenItsConsumerHasEndedAndNothingIsLeft() {
        var h = H.consuming()
        h.receive([1])
        h.stop()
        h.stored()
        #expect(h.consumerEnded() == [])
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "end session stopped"])
        #expect(h.closed() == ["stop pipeline 0"])
    }

    @Test func aShardStopFinishesTheBatchInHandAndHandsTheRestOver() {
        var h = H.consuming(shard: true)
        h.receive([1])
        h.receive([2])
        #expect(h.stop() == ["2 requeued"], "not started: handed over with the shard")
        h.stored()
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "end session stopped"])
    }

    @Test func anIdleShardStopsAtOnce() {
        var h = H.consuming(shard: true)
        #expect(h.stop() == ["end session stopped"])
    }

    @Test func aStopWhileTheStoreIsOutGivesBackWhatIsHeld() {
        var h = H.consuming()
        h.receive([1])
        h.storeFails(H.outage)
        #expect(h.stop() == ["1 requeued", "cancel consumer", "end session stopped"], "nothing to wait for")
    }

    @Test func aStopWhileConnectingTakesNothing() {
        var h = H(queues: [ConsumedQueue(name: "work", retryQueue: "retry", isShard: false)])
        h.start()
        #expect(h.stop() == [])
        #expect(h.started() == ["end session stopped"])
        #expect(h.closed() == ["stop pipeline 0"])
    }

    @Test func aStopBetweenSessionsStopsThePipeline() {
        var h = H.consuming()
        h.sessionFailed()
        h.closed()
        h.connects.removeAll()
        #expect(h.stop() == [], "the pipeline is connecting: it stops when that session ends")
    }

    // MARK: - Failures

    @Test func aFailedSessionLeavesEverythingUnsettledToTheBrokerAndReconnects() {
        var h = H.consuming()
        h.receive([1, 2])
        h.stored()
        h.receive([3])
        #expect(
            h.sessionFailed() == [
                "session failed", "1 dropped_with_session", "2 dropped_with_session", "3 dropped_with_session",
                "end session failed",
            ])
        #expect(h.confirmed() == [], "a confirm of the failed session changes nothing")
        #expect(h.closed() == ["reconnecting 1", "connect 0.2"])
    }

    @Test func reconnectAttemptsGrowUntilASessionConsumes() {
        var h = H(queues: [ConsumedQueue(name: "work", retryQueue: "retry", isShard: false)])
        h.start()
        for attempt in 1...3 {
            let id = h.connects.removeFirst()
            _ = h.apply(
                h.machine.sessionFailed(id, error: AMQPError(code: .connectionFailed, message: "refused"), now: h.now))
            #expect(h.closed() == ["reconnecting \(attempt)", "connect 0.\(attempt + 1)"])
        }
    }

    @Test func aMessageThatFailsItsSessionAloneThreeTimesIsDeadLetteredUnprocessed() {
        var h = H.consuming()
        let poison = AMQPError(code: .connectionClosedByBroker, message: "internal error", replyCode: 541)
        h.receive([1, 2], body: "{}")
        h.sessionFailed(poison)
        for round in 1...3 {
            h.closed()
            h.started()
            // Suspects are processed one at a time, alone.
            #expect(h.receive([1, 2], body: "{}") == ["store 1"], "round \(round)")
            h.sessionFailed(poison)
        }
        h.closed()
        h.started()
        #expect(h.receive([1, 2], body: "{}") == ["publish 1×1"], "condemned: its dead letter, unprocessed")
        #expect(h.confirmed() == ["settle ack 1", "1 poison", "store 2"])
    }

    @Test func theBrokersConsumerTimeoutMakesNoSuspects() {
        var h = H.consuming()
        let timedOut = AMQPError(
            code: .channelClosedByBroker, message: "closed", replyCode: 406,
            replyText:
                "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1800000 ms."
        )
        h.receive([1])
        h.sessionFailed(timedOut)
        h.closed()
        h.started()
        #expect(h.receive([1, 2]) == ["store 1,2"], "not isolated: the timeout was not the message's fault")
    }

    @Test func aTopologyConflictStopsTheWorker() {
        var h = H(queues: [ConsumedQueue(name: "work", retryQueue: "retry", isShard: false)])
        h.start()
        let id = h.connects.removeFirst()
        let conflict = TopologyError(
            underlying: AMQPError(code: .channelClosedByBroker, message: "406", replyCode: 406),
            explanation: "declared with other arguments")
        let lines = h.apply(h.machine.sessionFailed(id, error: conflict, now: h.now))
        #expect(lines == ["end session failed", "fail worker"])
        #expect(h.closed() == ["stop pipeline 0"])
    }
}

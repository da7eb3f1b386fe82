import AMQPTransport
import Testing
import WalletMessages

@testable import WalletWorker

/// A message refused on its last attempt is dead-lettered only while the results go through for others
/// (`ResultsKillSwitch.lastAttemptRefused`, docs/contract-decisions.md "A failure every message meets"): at a few
/// messages a minute a downstream outage never reaches the activation count, and its retries would otherwise
/// dead-letter every message. When two distinct messages were refused since results were last taken and none were
/// taken since the last attempt's first could have been, it pauses instead. The harness's schedule: 5 attempts, 5 s
/// first, so the shortest time from a first attempt to the last is 5 + 5 + 10 + 20 = 40 s; the window is 10 s.
@Suite("Delivery lifecycle: a dead letter needs others' results taken") struct DeliveryLifecycleLastAttemptTests {
    typealias H = LifecycleHarness
    static let noRoute = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")

    static func harness(holdsRefused: Bool = false) -> H {
        DeliveryLifecycleResultsPauseTests.harness(holdsRefused: holdsRefused)
    }

    /// One delivery whose results are taken, at the harness's clock.
    static func takeOne(_ h: inout H, tag: UInt64) {
        h.receive([tag])
        h.stored()
        #expect(h.confirmed() == ["settle ack \(tag)", "\(tag) processed"])
    }

    // MARK: - Taking results

    @Test func aQuietNightsLastAttemptRefusedWithNothingTakenPausesInsteadOfDeadLettering() {
        var h = Self.harness()
        h.receive([1], failedAttempts: 1)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == ["publish 1×1"], "an earlier attempt: retried")
        #expect(h.confirmed() == ["settle ack 1", "1 retried"])
        h.now += .seconds(60)
        h.receive([2], failedAttempts: 4)
        h.stored()
        #expect(
            h.confirmed(Self.noRoute) == [
                "paused for the results", "timer results trial", "2 requeued", "end session paused for the results",
            ])
        #expect(h.machine.isPausedForResults)
        #expect(h.invariants.violations == [])
    }

    @Test func aMessageAloneIsDeadLetteredItsOwnRouteOrEveryonesNothingTellsThemApart() {
        var h = Self.harness()
        h.receive([1], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == ["publish 1×1"], "its dead letter")
        #expect(h.confirmed() == ["settle ack 1", "1 retries_exhausted", "note m1 undelivered (retries_exhausted)"])
        #expect(!h.machine.isPausedForResults)
    }

    @Test func twoLastAttemptsInOneBatchPause() {
        var h = Self.harness()
        h.receive([1, 2], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute).first == "paused for the results")
    }

    @Test func aQuietActivationOfZeroDeadLettersAsBefore() {
        var h = H {
            $0.resultsKillSwitch = ResultsKillSwitch.Settings(
                window: .seconds(10), activation: 3, tripRatio: 0.5, quietActivation: 0)
        }
        h.start()
        h.started()
        h.receive([1, 2], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == ["publish 1×1,2×1"])
        #expect(!h.machine.isPausedForResults)
    }

    @Test func anEarlierAttemptRefusedWithNothingTakenIsRetriedAsBefore() {
        var h = Self.harness()
        h.receive([1], failedAttempts: 3)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == ["publish 1×1"])
        #expect(h.confirmed() == ["settle ack 1", "1 retried"])
        #expect(!h.machine.isPausedForResults)
    }

    @Test(
        "the last attempt refused is dead-lettered when another delivery's results were taken within the shortest time since its first attempt",
        arguments: [Duration.seconds(1), .seconds(40)])
    func theLastAttemptIsDeadLetteredWhileOthersAreTaken(since: Duration) {
        var h = Self.harness()
        Self.takeOne(&h, tag: 1)
        h.now += since
        h.receive([2, 3], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == ["publish 2×1,3×1"], "their dead letters")
        #expect(
            h.confirmed() == [
                "settle ack ≤3", "2 retries_exhausted", "3 retries_exhausted",
                "note m2 undelivered (retries_exhausted), m3 undelivered (retries_exhausted)",
            ])
        #expect(!h.machine.isPausedForResults)
        #expect(h.invariants.violations == [])
    }

    @Test func resultsTakenLongerAgoThanTheMessagesRetriesTookProveNothing() {
        var h = Self.harness()
        Self.takeOne(&h, tag: 1)
        h.now += .seconds(41)
        h.receive([2, 3], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute).first == "paused for the results")
    }

    @Test func aResultTakenInTheSameBatchIsEvidence() {
        var h = Self.harness()
        h.receive([1, 2, 3], failedAttempts: [2: 4, 3: 4])
        h.stored()
        #expect(h.confirmed(returning: [2, 3]) == ["publish 2×1,3×1"], "their dead letters: 1's results were taken")
        #expect(!h.machine.isPausedForResults)
    }

    @Test func aMessageWithoutAnIdIsAloneThroughItsRetries() {
        var h = Self.harness()
        for (tag, failed) in zip(UInt64(1)...5, 0...4) {
            var original = H.original(id: nil)
            if failed > 0 { original.properties.headers = [WorkerHeaders.retryCount: .int32(Int32(failed))] }
            let delivery = DeliveryLifecycle.Delivery(
                tag: tag, original: original, redelivered: false, receivedAt: h.now)
            h.deliveries[tag] = delivery
            h.invariants.received(h.session!, tag)
            _ = h.apply(h.machine.batchReceived(h.session!, [delivery], now: h.now))
            h.stored()
            #expect(
                h.confirmed(Self.noRoute) == ["publish \(tag)×1"], "attempt \(failed + 1): retried, then dead-lettered")
            h.confirmed()
            h.now += .seconds(20)
        }
        #expect(!h.machine.isPausedForResults)
        #expect(h.invariants.violations == [])
    }

    @Test func aStoppingSessionHandsBackALastAttemptRefusedAfterThePauseInsteadOfDeadLetteringIt() {
        var h = Self.harness()
        h.receive([1], failedAttempts: 1)
        h.stored()
        h.confirmed(Self.noRoute)
        h.confirmed()
        h.receive([2], failedAttempts: 4)
        h.receive([3], failedAttempts: 4)
        h.stored()
        h.stored()
        #expect(h.stop() == ["cancel consumer"])
        #expect(
            h.confirmed(Self.noRoute) == ["paused for the results", "timer results trial", "2 requeued"],
            "m1 and m2 refused, nothing taken: the quiet rule")
        // The stopping session goes on as it was, its last batch's confirms come: no dead letter for 3 either.
        #expect(h.confirmed(Self.noRoute) == ["3 requeued"])
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialsDeadlineCountsNoResultTakenBeforeThePause() {
        var h = Self.harness()
        Self.takeOne(&h, tag: 1)
        h.now += .seconds(2)
        h.receive([2, 3, 4])
        h.stored()
        #expect(h.confirmed(Self.noRoute).first == "paused for the results", "the window's rule")
        h.closed()
        h.now += .seconds(5)
        h.fire("results trial")
        h.started()
        h.receive([5], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == [], "held for the verdict")
        #expect(
            h.fire("trial deadline", advance: .seconds(10)).first == "trial 1 failed: paused for the results",
            "1's result, taken 17 s ago, is within the 40 s its retries took, but before the pause")
    }

    @Test(
        "with one attempt the window is how far back it looks",
        arguments: [(Duration.seconds(10), false), (.seconds(11), true)])
    func withOneAttemptTheWindowIsTheHorizon(since: Duration, pauses: Bool) {
        var h = H {
            $0.retry = RetrySchedule(firstDelay: .seconds(5), longestDelay: .seconds(300), attempts: 1)
            $0.resultsKillSwitch = ResultsKillSwitch.Settings(window: .seconds(10), activation: 3, tripRatio: 0.5)
        }
        h.start()
        h.started()
        Self.takeOne(&h, tag: 1)
        h.now += since
        h.receive([2, 3])
        h.stored()
        #expect(h.confirmed(Self.noRoute).first == (pauses ? "paused for the results" : "publish 2×1,3×1"))
    }

    @Test func onAQuorumQueueTheLastAttemptIsHeldThroughThePause() {
        var h = Self.harness(holdsRefused: true)
        h.receive([1, 2], failedAttempts: 4)
        h.stored()
        #expect(
            h.confirmed(Self.noRoute) == [
                "paused for the results", "timer results trial", "cancel consumer", "timer give back held results",
            ])
        #expect(h.invariants.violations == [])
    }

    // MARK: - A trial

    @Test func aTrialWithoutAVerdictHoldingALastAttemptPausesAgainInsteadOfResuming() {
        var h = DeliveryLifecycleResultsPauseTests.paused()
        h.fire("results trial")
        h.started()
        h.receive([4], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == [], "held for the verdict")
        #expect(
            h.fire("trial deadline", advance: .seconds(10)) == [
                "trial 1 failed: paused for the results", "timer results trial", "4 requeued",
                "end session paused for the results",
            ])
        #expect(h.machine.isPausedForResults)
        #expect(h.invariants.violations == [])
    }

    @Test func aTrialWithoutAVerdictHoldingEarlierAttemptsStillResumes() {
        var h = DeliveryLifecycleResultsPauseTests.paused()
        h.fire("results trial")
        h.started()
        h.receive([4], failedAttempts: 3)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == [])
        #expect(h.fire("trial deadline", advance: .seconds(10)) == ["resumed, gave back 3", "publish 4×1"])
    }

    @Test func aTrialWhereAnotherMessagesResultsAreTakenDeadLettersTheLastAttemptAlone() {
        var h = DeliveryLifecycleResultsPauseTests.paused()
        h.fire("results trial")
        h.started()
        h.receive([4], failedAttempts: 4)
        h.stored()
        #expect(h.confirmed(Self.noRoute) == [])
        h.receive([5])
        h.stored()
        #expect(h.confirmed() == ["settle ack 5", "5 processed", "resumed, gave back 3", "publish 4×1"])
        #expect(h.confirmed() == ["settle ack 4", "4 retries_exhausted", "note m4 undelivered (retries_exhausted)"])
        #expect(h.invariants.violations == [])
    }
}

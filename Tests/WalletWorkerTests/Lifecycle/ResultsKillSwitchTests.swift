import TestSupport
import Testing

@testable import WalletWorker

/// Every row of the rule that tells a failure every message meets (pause) from a message's own (retry, then dead
/// letter): issue 36's list, each at the clock's exact edges.
@Suite struct ResultsKillSwitchTests {
    let noRoute = ResultsKillSwitch.Outcome.refused(
        exchange: "wallet.events", reason: "returned by the broker (312 NO_ROUTE)")
    let nack = ResultsKillSwitch.Outcome.refused(
        exchange: "wallet.transactions", reason: "not confirmed: the broker nacked the publish")

    @Test func everyResultReturnedTripsOnTheActivationCount() {
        var rule = ResultsKillSwitch()
        for n in 1..<10 {
            #expect(rule.record(noRoute, key: "m\(n)", now: .milliseconds(n * 10)) == .holds)
        }
        guard case .trips(let cause) = rule.record(noRoute, key: "m10", now: .milliseconds(100)) else {
            Issue.record("ten distinct messages, every one returned, did not trip it")
            return
        }
        #expect(cause.contains("10 of 10 deliveries"))
        #expect(cause.contains("10 distinct messages"))
        #expect(cause.contains("'wallet.events'"))
        #expect(cause.contains("312 NO_ROUTE"))
    }

    // MARK: - A last attempt: dead-lettered only while others' results are taken

    /// Two distinct messages refused, nothing taken: what a quiet night's downstream outage looks like.
    private func twoRefused(_ rule: inout ResultsKillSwitch, at now: Duration) {
        #expect(rule.record(noRoute, key: "other", now: now) == .holds)
        #expect(rule.record(noRoute, key: "m1", now: now) == .holds)
    }

    @Test func aLastAttemptRefusedAfterAnotherAndBeforeAnyResultWasTakenTripsIt() {
        var rule = ResultsKillSwitch()
        twoRefused(&rule, at: .seconds(100))
        guard
            case .trips(let cause) = rule.lastAttemptRefused(
                key: "m1", attempts: 5, reason: "returned (312 NO_ROUTE)", horizon: .seconds(40), now: .seconds(100))
        else {
            Issue.record("nothing was ever taken, two messages refused, yet the last attempt would be dead-lettered")
            return
        }
        #expect(cause.contains("message 'm1' refused on its last attempt (5)"), "\(cause)")
        #expect(cause.contains("2 distinct messages refused"), "\(cause)")
        #expect(cause.contains("in the last 40 s") && cause.contains("312 NO_ROUTE"), "\(cause)")
        let anonymous = rule.lastAttemptRefused(
            key: nil, attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(100))
        guard case .trips(let without) = anonymous else {
            Issue.record("a message without an id would be dead-lettered")
            return
        }
        #expect(without.contains("a message without an id"))
    }

    @Test func aMessageAloneHoldsItsOwnRouteOrEveryonesNothingTellsThemApart() {
        var rule = ResultsKillSwitch()
        for attempt in 0..<5 {
            #expect(rule.record(noRoute, key: "alone", now: .seconds(Int64(attempt * 10))) == .holds)
        }
        #expect(
            rule.lastAttemptRefused(key: "alone", attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(40))
                == .holds)
    }

    @Test(
        "a result taken within the horizon holds (the message's own failure); one taken before it trips",
        arguments: [(Duration.seconds(60), true), (.seconds(99), true), (.milliseconds(59_999), false)])
    func theHorizonsEdge(takenAt: Duration, holds: Bool) {
        var rule = ResultsKillSwitch()
        rule.recordDelivered(1, now: takenAt)
        twoRefused(&rule, at: .seconds(100))
        let verdict = rule.lastAttemptRefused(
            key: "m1", attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(100))
        #expect((verdict == .holds) == holds)
    }

    @Test func aHorizonShorterThanTheWindowIsTheWindow() {
        var rule = ResultsKillSwitch(settings: .init(window: .seconds(10)))
        #expect(rule.record(.delivered, key: "m0", now: .seconds(90)) == .holds)
        twoRefused(&rule, at: .seconds(95))
        #expect(
            rule.lastAttemptRefused(key: "m1", attempts: 1, reason: "r", horizon: .zero, now: .seconds(100)) == .holds)
        #expect(
            rule.lastAttemptRefused(key: "m1", attempts: 1, reason: "r", horizon: .zero, now: .milliseconds(100_001))
                != .holds)
    }

    @Test func aResultTakenForgetsTheRefusalsBeforeIt() {
        var rule = ResultsKillSwitch()
        twoRefused(&rule, at: .seconds(1))
        rule.recordDelivered(1, now: .seconds(2))
        #expect(rule.record(noRoute, key: "m1", now: .seconds(200)) == .holds)
        #expect(
            rule.lastAttemptRefused(key: "m1", attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(200))
                == .holds, "one message refused since: alone")
    }

    @Test func aResetForgetsTheWindowButNotWhenResultsWereLastTakenNorWhatWasRefusedSince() {
        var rule = ResultsKillSwitch()
        rule.recordDelivered(3, now: .seconds(1))
        twoRefused(&rule, at: .seconds(60))
        rule.reset()
        #expect(rule.lastTaken == .seconds(1))
        #expect(rule.refusedSinceTaken == ["other", "m1"])
        #expect(
            rule.lastAttemptRefused(key: "m1", attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(100))
                != .holds)
    }

    @Test func aQuietActivationOfZeroNeverTrips() {
        var rule = ResultsKillSwitch(settings: .init(quietActivation: 0))
        twoRefused(&rule, at: .seconds(100))
        #expect(
            rule.lastAttemptRefused(key: "m1", attempts: 5, reason: "r", horizon: .seconds(40), now: .seconds(100))
                == .holds)
    }

    @Test func oneMessageRetriedAgainAndAgainNeverTripsIt() {
        var rule = ResultsKillSwitch()
        for attempt in 0..<1_000 {
            #expect(rule.record(noRoute, key: "the same", now: .milliseconds(attempt)) == .holds)
        }
    }

    @Test func returnsBelowTheActivationCountHold() {
        var rule = ResultsKillSwitch(settings: .init(window: .seconds(10), activation: 20, tripRatio: 0.5))
        for n in 0..<19 {
            #expect(rule.record(noRoute, key: "m\(n)", now: .seconds(1)) == .holds)
        }
        #expect(rule.record(noRoute, key: "m19", now: .seconds(1)) != .holds)
    }

    @Test func aRouteOfItsOwnAmongOthersThatRouteStaysPerMessage() {
        var rule = ResultsKillSwitch()
        for n in 0..<1_000 {
            let now = Duration.milliseconds(n * 5)
            if n % 10 == 0 {
                // One in ten: its own routing key has no binding. 100 distinct messages, far over the activation count.
                #expect(rule.record(noRoute, key: "own \(n)", now: now) == .holds)
            } else {
                #expect(rule.record(.delivered, key: "m\(n)", now: now) == .holds)
            }
        }
    }

    @Test func theRatioIsOfTheWindowsDeliveries() {
        var rule = ResultsKillSwitch(settings: .init(window: .seconds(10), activation: 10, tripRatio: 0.5))
        for n in 0..<11 { _ = rule.record(.delivered, key: "ok \(n)", now: .seconds(1)) }
        for n in 0..<10 { #expect(rule.record(nack, key: "m\(n)", now: .seconds(2)) == .holds) }
        // 11 of 22: half.
        #expect(rule.record(nack, key: "m10", now: .seconds(2)) != .holds)
    }

    @Test func aNackStormTripsItLikeReturns() {
        var rule = ResultsKillSwitch()
        var verdicts: [ResultsKillSwitch.Verdict] = []
        for n in 0..<10 { verdicts.append(rule.record(nack, key: "m\(n)", now: .seconds(3))) }
        #expect(verdicts.dropLast().allSatisfy { $0 == .holds })
        guard case .trips(let cause) = verdicts.last else {
            Issue.record("a nack storm did not trip it")
            return
        }
        #expect(cause.contains("'wallet.transactions'"))
    }

    @Test func aConfirmTimeoutTripsItAtOnce() {
        var rule = ResultsKillSwitch()
        _ = rule.record(.delivered, key: "m1", now: .seconds(1))
        #expect(
            rule.record(.confirmTimedOut(reason: "no confirm in 30 s"), key: "m2", now: .seconds(40))
                == .trips(cause: "the broker confirmed no result in time: no confirm in 30 s"))
    }

    @Test func refusalsOlderThanTheWindowAreForgotten() {
        var rule = ResultsKillSwitch(settings: .init(window: .seconds(10), activation: 10, tripRatio: 0.5))
        for n in 0..<9 { _ = rule.record(noRoute, key: "old \(n)", now: .milliseconds(500)) }
        // Second 0 is still in a window that ends in second 9 ...
        #expect(rule.record(noRoute, key: "new", now: .milliseconds(9_999)) != .holds)
        var later = ResultsKillSwitch(settings: .init(window: .seconds(10), activation: 10, tripRatio: 0.5))
        for n in 0..<9 { _ = later.record(noRoute, key: "old \(n)", now: .milliseconds(500)) }
        // ... and out of one that ends in second 10.
        #expect(later.record(noRoute, key: "new", now: .milliseconds(10_000)) == .holds)
    }

    @Test func deliveriesOlderThanTheWindowNoLongerDiluteTheRatio() {
        var rule = ResultsKillSwitch()
        for n in 0..<1_000 { _ = rule.record(.delivered, key: "ok \(n)", now: .seconds(1)) }
        for n in 0..<9 { #expect(rule.record(noRoute, key: "m\(n)", now: .seconds(20)) == .holds) }
        #expect(rule.record(noRoute, key: "m9", now: .seconds(20)) != .holds)
    }

    @Test func messagesWithoutAnIdAreEachAMessageOfTheirOwn() {
        var rule = ResultsKillSwitch()
        for _ in 0..<9 { #expect(rule.record(noRoute, key: nil, now: .seconds(1)) == .holds) }
        #expect(rule.record(noRoute, key: nil, now: .seconds(1)) != .holds)
    }

    @Test func aResetForgetsWhatCameBeforeThePause() {
        var rule = ResultsKillSwitch()
        for n in 0..<9 { _ = rule.record(noRoute, key: "m\(n)", now: .seconds(1)) }
        rule.reset()
        #expect(rule.record(noRoute, key: "m9", now: .seconds(1)) == .holds)
    }

    /// The running totals agree with a count from scratch over the window, whatever the sequence.
    @Test(arguments: [UInt64(7), 11, 2026])
    func theVerdictAgreesWithACountFromScratch(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let settings = ResultsKillSwitch.Settings(window: .seconds(3), activation: 4, tripRatio: 0.6)
        var rule = ResultsKillSwitch(settings: settings)
        var history: [(second: Int64, key: String, refused: Bool)] = []
        var now = Duration.zero
        for _ in 0..<3_000 {
            now += .milliseconds(Int64(random.next(below: 400)))
            let refused = random.next(below: 3) > 0
            let key = "m\(random.next(below: 12))"
            let verdict = rule.record(refused ? noRoute : .delivered, key: key, now: now)
            let second = now.components.seconds
            history.append((second, key, refused))
            let window = history.filter { $0.second > second - 3 }
            let refusals = window.filter(\.refused)
            let trips =
                Set(refusals.map(\.key)).count >= 4 && Double(refusals.count) >= 0.6 * Double(window.count)
            #expect((verdict != .holds) == (refused && trips))
            if verdict != .holds {
                rule.reset()
                history = []
            }
        }
    }

    /// The quiet rule against a model kept from scratch, whatever the sequence: a last attempt trips it exactly when
    /// no result was taken within the horizon (or the window, whichever is longer; with `takenAfter`, after it), and
    /// at least `quietActivation` distinct messages with an id, itself included, were refused since the last result
    /// taken. Resets (a pause) in between forget neither. So a last attempt is never kept from its dead letter while
    /// results are taken for others, and refusals without an id never add up to an outage.
    @Test(arguments: [UInt64(3), 17, 2026])
    func theQuietRuleAgreesWithAModelFromScratch(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let settings = ResultsKillSwitch.Settings(
            window: .seconds(5), activation: 1_000, tripRatio: 1, quietActivation: 2 + Int(seed % 2))
        var rule = ResultsKillSwitch(settings: settings)
        var lastTaken: Duration?
        var refusedSinceTaken: Set<String> = []
        var now = Duration.zero
        var (tripped, heldForATakenResult) = (0, 0)
        for step in 0..<5_000 {
            now += .milliseconds(Int64(random.next(below: 1_500)))
            let key: String? = random.next(below: 6) == 0 ? nil : "m\(random.next(below: 8))"
            switch random.next(below: 10) {
            case 0..<2:
                if random.next(below: 2) == 0 {
                    _ = rule.record(.delivered, key: key, now: now)
                } else {
                    rule.recordDelivered(1 + random.next(below: 3), now: now)
                }
                lastTaken = now
                refusedSinceTaken = []
            case 2..<7:
                _ = rule.record(.refused(exchange: "x", reason: "r"), key: key, now: now)
                if let key { refusedSinceTaken.insert(key) }
            case 7:
                if let key {
                    rule.noteRefused(key: key)
                    refusedSinceTaken.insert(key)
                }
            case 8:
                rule.reset()
            default:
                let horizon = Duration.seconds(random.next(below: 40))
                let takenAfter: Duration? =
                    random.next(below: 3) == 0 ? now - .milliseconds(Int64(random.next(below: 20_000))) : nil
                let verdict = rule.lastAttemptRefused(
                    key: key, attempts: 5, reason: "r", takenAfter: takenAfter, horizon: horizon, now: now)
                let recentlyTaken =
                    lastTaken.map { taken in
                        now - taken <= max(horizon, settings.window) && takenAfter.map { taken > $0 } ?? true
                    } ?? false
                let distinct = key.map { refusedSinceTaken.union([$0]).count } ?? refusedSinceTaken.count + 1
                let expected = !recentlyTaken && distinct >= settings.quietActivation
                #expect(
                    (verdict != .holds) == expected,
                    """
                    seed \(seed), step \(step): \(verdict) for \(key ?? "no id") at \(now), horizon \(horizon), \
                    taken after \(String(describing: takenAfter)); last taken \(String(describing: lastTaken)), \
                    refused since \(refusedSinceTaken.sorted())
                    """)
                if expected { tripped += 1 }
                if recentlyTaken && distinct >= settings.quietActivation { heldForATakenResult += 1 }
            }
        }
        #expect(
            tripped > 20 && heldForATakenResult > 20,
            "seed \(seed): not vacuous: \(tripped) trips, \(heldForATakenResult) held for a result taken")
    }
}

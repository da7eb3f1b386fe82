import Testing

@testable import WalletWorker

/// The results' sub-machine of the lifecycle on its own: taking, paused, trying, and what each input says.
@Suite("Results availability") struct ResultsAvailabilityTests {
    static let deadline = DeliveryLifecycle.TimerID(value: 7)

    @Test func aPauseCountsWhatIsGivenBackAndATrialThatDeliversResumesWithIt() {
        var results = ResultsAvailability()
        let attempt = results.pause(now: .seconds(10), cause: "no route")
        #expect(attempt == 1)
        #expect(results.isPaused && results.attempt == 1)
        results.gaveBack(150)
        let began = results.trialBegins(deadline: Self.deadline)
        #expect(began && results.isTrying)
        results.gaveBack(50)
        let verdict = results.trialDelivered(now: .seconds(25))
        #expect(verdict == .resumes(after: .seconds(15), gaveBack: 200))
        #expect(results.state == .taking)
    }

    @Test func refusalsInATrialHoldUntilTheActivationCountOfDistinctMessagesThenPauseAgain() {
        var results = ResultsAvailability()
        _ = results.pause(now: .zero, cause: "no route")
        _ = results.trialBegins(deadline: Self.deadline)
        let verdicts = ["a", "a", "b"].map { results.trialRefused(key: $0, reason: "312", activation: 3) }
        #expect(verdicts == [.holds, .holds, .holds], "the same message twice is one")
        guard case .pausesAgain(let cause) = results.trialRefused(key: "c", reason: "312", activation: 3) else {
            Issue.record("three distinct messages did not pause it again")
            return
        }
        #expect(cause.hasPrefix("3 distinct messages' results refused in trial 1"))
        // The next trial waits longer: its attempt is the second.
        let next = results.pause(now: .seconds(5), cause: cause)
        #expect(next == 2)
        #expect(results.attempt == 2)
    }

    @Test func aTrialsDeadlineResumesItAndAStaleOneDoesNothing() {
        var results = ResultsAvailability()
        _ = results.pause(now: .zero, cause: "no route")
        let early = results.trialDeadlinePassed(Self.deadline, now: .seconds(1))
        #expect(early == nil, "no trial yet")
        _ = results.trialBegins(deadline: Self.deadline)
        let stale = results.trialDeadlinePassed(DeliveryLifecycle.TimerID(value: 8), now: .seconds(1))
        #expect(stale == nil)
        let due = results.trialDeadlinePassed(Self.deadline, now: .seconds(12))
        #expect(due == .resumes(after: .seconds(12), gaveBack: 0))
        let again = results.trialBegins(deadline: Self.deadline)
        #expect(!again, "a trial timer with no pause")
    }
}

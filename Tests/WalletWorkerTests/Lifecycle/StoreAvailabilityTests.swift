import Testing

@testable import WalletWorker

/// The store's availability, a sub-machine of the delivery lifecycle: an outage begins once, one probe at a time,
/// its tries counted, and it ends with how long it lasted; stale and abandoned answers change nothing.
@Suite("Store availability")
struct StoreAvailabilityTests {
    private let check = DeliveryLifecycle.CheckID(value: 7)
    private let other = DeliveryLifecycle.CheckID(value: 8)

    @Test func anOutageBeginsOnceAndItsFirstProbeIsTryOne() {
        var store = StoreAvailability()
        #expect(!store.isOut && !store.probeIsDue)
        let began = store.wentOut(now: .seconds(3))
        let beganAgain = store.wentOut(now: .seconds(4))
        #expect(began)
        #expect(!beganAgain, "already out: no second outage")
        #expect(store.state == .out(since: .seconds(3), attempt: 1, checking: nil))
        #expect(store.isOut && store.probeIsDue)
    }

    @Test func oneProbeAtATime() {
        var store = StoreAvailability()
        _ = store.wentOut(now: .zero)
        store.probeStarted(check)
        #expect(!store.probeIsDue, "a timer firing while a check is in flight starts none")
    }

    @Test func aFailedProbeCountsTheNextTry() {
        var store = StoreAvailability()
        _ = store.wentOut(now: .zero)
        store.probeStarted(check)
        let first = store.probeAnswered(check, passed: false, now: .seconds(1))
        #expect(first == .stillOut(nextAttempt: 2))
        #expect(store.probeIsDue)
        store.probeStarted(other)
        let second = store.probeAnswered(other, passed: false, now: .seconds(2))
        #expect(second == .stillOut(nextAttempt: 3))
    }

    @Test func aPassedProbeEndsTheOutageWithItsLength() {
        var store = StoreAvailability()
        _ = store.wentOut(now: .seconds(10))
        store.probeStarted(check)
        let answer = store.probeAnswered(check, passed: true, now: .seconds(25))
        #expect(answer == .back(after: .seconds(15)))
        #expect(store.state == .available)
        let again = store.wentOut(now: .seconds(30))
        #expect(again, "a new outage can begin")
    }

    @Test func answersThatAreNotTheProbeInFlightChangeNothing() {
        var store = StoreAvailability()
        let noOutage = store.probeAnswered(check, passed: true, now: .zero)
        #expect(noOutage == .ignored)
        _ = store.wentOut(now: .zero)
        let noCheck = store.probeAnswered(check, passed: true, now: .zero)
        #expect(noCheck == .ignored)
        store.probeStarted(check)
        let another = store.probeAnswered(other, passed: true, now: .zero)
        #expect(another == .ignored)
        #expect(store.state == .out(since: .zero, attempt: 1, checking: check))
    }

    @Test func anAbandonedProbeLeavesTheOutageAsItIs() {
        var store = StoreAvailability()
        _ = store.wentOut(now: .seconds(1))
        store.probeStarted(check)
        store.probeAbandoned(check)
        #expect(store.state == .out(since: .seconds(1), attempt: 1, checking: nil))
    }
}

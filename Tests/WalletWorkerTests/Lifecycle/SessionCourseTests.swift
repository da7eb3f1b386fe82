import Testing

@testable import WalletWorker

/// A session's course, a sub-machine of the delivery lifecycle: it connects, consumes and takes work, hands back what
/// arrives once it takes no more (and says why), and ends once, with the end its state calls for.
@Suite("Session course")
struct SessionCourseTests {
    private func consuming() -> SessionCourse {
        var course = SessionCourse()
        course.started()
        return course
    }

    @Test func aStartedSessionTakesWorkUntilItTakesNoMore() {
        var course = SessionCourse()
        #expect(!course.isConsuming && !course.takesWork && !course.handsBackWhatArrives && !course.hasConsumed)
        course.started()
        #expect(course.isConsuming && course.takesWork && !course.handsBackWhatArrives)
        #expect(course.endOnceEmpty == nil, "a consuming session with nothing asked of it goes on")
        course.takeNoMore()
        #expect(!course.takesWork && course.handsBackWhatArrives)
        #expect(course.handBackReason == "the session is closing")
    }

    @Test func aStopAskedWhileConnectingIsAppliedWhenTheSessionStarts() {
        var course = SessionCourse()
        let applyNow = course.requestStop()
        #expect(!applyNow, "nothing to stop yet")
        #expect(course.stopRequested)
        course.started()
        #expect(!course.takesWork, "stopped while connecting: it takes nothing")
        #expect(course.handBackReason == "the worker is stopping")
        #expect(course.endOnceEmpty == .stopped)
    }

    @Test func aStopIsAppliedOnce() {
        var course = consuming()
        let first = course.requestStop()
        let second = course.requestStop()
        #expect(first && !second)
        #expect(course.takesWork, "a work-queue session finishes what it took on, and takes what is in flight")
        #expect(course.endOnceEmpty == nil, "its consumer has not ended: deliveries may still arrive")
        course.consumerEnded()
        #expect(course.endOnceEmpty == .stopped)
    }

    @Test func aConsumerThatEndsWithoutAStopEndsTheSessionForANewOne() {
        var course = consuming()
        course.consumerEnded()
        #expect(course.consumerHasEnded)
        #expect(course.endOnceEmpty == .consumerEnded)
    }

    @Test func aGiveBackForTheStoreStaysOneThroughALaterStop() {
        var course = consuming()
        course.takeNoMore(.heldForTheStore(.seconds(450)))
        #expect(course.isGivingBackForTheStore)
        _ = course.requestStop()
        course.takeNoMore(.stopping)
        #expect(course.isGivingBackForTheStore, "the first specific reason stays")
        #expect(course.endOnceEmpty == .pausedForStore)
        #expect(course.handBackReason.hasPrefix("held 7.5m for the store"), "\(course.handBackReason)")
    }

    @Test func closingGivesWayToASpecificReason() {
        var course = consuming()
        course.takeNoMore()
        course.takeNoMore(.shardHandedOver)
        #expect(course.handBackReason == "handed over with its shard")
        course.takeNoMore(.stopping)
        #expect(course.handBackReason == "handed over with its shard")
    }

    @Test func anEndedSessionHandsBackEverythingAndKeepsWhetherItConsumed() {
        var course = consuming()
        course.takeNoMore(.stopping)
        course.end(.stopped)
        #expect(course.hasEnded && !course.isConsuming && course.hasConsumed)
        #expect(course.handsBackWhatArrives && !course.takesWork)
        #expect(course.handBackReason == "the worker is stopping", "late deliveries say why they went back")
        #expect(course.endOnceEmpty == nil, "ended once")
        #expect(!course.stopRequested)

        var failedToConnect = SessionCourse()
        failedToConnect.end(.failed(error: "ECONNREFUSED"))
        #expect(failedToConnect.state == .ended(.failed(error: "ECONNREFUSED"), wasConsuming: false, handBack: nil))
        #expect(!failedToConnect.hasConsumed)
    }

    @Test func staleInputsAfterTheEndChangeNothing() {
        var course = consuming()
        course.end(.failed(error: "connection reset"))
        let ended = course.state
        course.started()
        course.consumerEnded()
        course.takeNoMore(.stopping)
        let applyStop = course.requestStop()
        #expect(!applyStop)
        #expect(course.state == ended)
    }
}

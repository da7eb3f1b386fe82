import Testing

@testable import WalletWorker

/// The worker's course, a sub-machine of the delivery lifecycle: it stops once, and the first failure no retry
/// fixes is the one it exits with, whether it came before the stop or during it.
@Suite("Worker course")
struct WorkerCourseTests {
    @Test func aStopHappensOnce() {
        var course = WorkerCourse()
        #expect(!course.isStopping && !course.hasFailed)
        let first = course.stop()
        let second = course.stop()
        #expect(first && !second)
        #expect(course.state == .stopping(failure: nil))
        #expect(!course.hasFailed, "SIGTERM is no failure: what is held is finished, not given back")
    }

    @Test func aFailureStopsARunningWorkerAndTheFirstOneStays() {
        var course = WorkerCourse()
        #expect(course.fail("406 PRECONDITION_FAILED") == .stopsTheWorker)
        #expect(course.isStopping && course.hasFailed)
        #expect(course.fail("another") == .alreadyFailed)
        let stopAfter = course.stop()
        #expect(!stopAfter, "already stopping")
        #expect(course.state == .stopping(failure: "406 PRECONDITION_FAILED"))
    }

    @Test func aFailureDuringTheStopIsRecordedAndTheStopIsNotBegunAgain() {
        var course = WorkerCourse()
        _ = course.stop()
        #expect(course.fail("schema newer than this build") == .duringTheStop)
        #expect(course.hasFailed)
        #expect(course.state == .stopping(failure: "schema newer than this build"))
    }
}

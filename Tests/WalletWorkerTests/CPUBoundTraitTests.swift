import TestSupport
import Testing

/// The tests' own `.cpuBound` trait: its cases run on its executor's thread, the others on the cooperative pool.
@Suite struct CPUBoundTraitTests {
    @Test(.cpuBound, arguments: [1, 2])
    func aCaseOfACPUBoundTestRunsOnItsThread(case: Int) async {
        #expect(CPUBoundTestExecutor.shared.isCurrent)
        await Task.yield()
        #expect(CPUBoundTestExecutor.shared.isCurrent, "resumed on it too")
    }

    @Test func anotherTestDoesNot() {
        #expect(!CPUBoundTestExecutor.shared.isCurrent)
    }

    @Suite(.cpuBound) struct ASuiteGivenTheTrait {
        @Test func aSynchronousTestOfItRunsOnItsThread() {
            #expect(CPUBoundTestExecutor.shared.isCurrent)
        }
    }
}

import Dispatch
import Testing

/// A trait for tests that compute for a second or more without awaiting (every option of `run` parsed, a property
/// test's hundreds of seeds, files opened by `concurrentPerform`): their test cases run one at a time on a thread of
/// their own, off Swift's cooperative pool.
///
/// The cooperative pool has one thread per core, two on CI, where every suite of the package runs at once in one
/// process, and a job is never preempted: a test computing for seconds on a pool thread takes it from every other test
/// as surely as one that blocks it (`offThePool`). At the start of a run such tests held both threads for 11 s here
/// and 20 s on CI, while the tests whose answers had arrived waited for a thread: on CI an OTLP export that had its
/// answer failed its 5 s timeout. On a thread of their own, the kernel shares the cores between them and the pool.
///
/// Given to a suite, it applies to each of its tests. Not for a test that blocks its thread waiting for another test
/// of this trait: they share the one thread.
public struct CPUBoundTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// Each test case, not the suite as a whole: a suite's scope would not move its tests' work.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(CPUBoundTestExecutor.shared) { try await function() }
    }
}

extension Trait where Self == CPUBoundTrait {
    /// Runs the test's cases on the thread for CPU-bound tests, off the cooperative pool (`CPUBoundTrait`).
    public static var cpuBound: Self { CPUBoundTrait() }
}

/// The executor of `CPUBoundTrait`: a serial dispatch queue, whose thread comes from dispatch's overcommitting pool
/// (a thread made when needed), not from the cooperative one.
public final class CPUBoundTestExecutor: TaskExecutor, Sendable {
    public static let shared = CPUBoundTestExecutor()

    private let queue = DispatchQueue(label: "wallet-tests.cpu-bound")
    private let marker = DispatchSpecificKey<Bool>()

    private init() {
        queue.setSpecific(key: marker, value: true)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Whether the caller runs on this executor's queue.
    public var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) == true }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a pthread mutex: the transport's state shared with its I/O thread, and the test kits' state
/// that the transport's tests share across threads.
///
/// Not `Synchronization.Mutex`: on Linux its contended path parks in the futex syscall inside the (uninstrumented)
/// standard library, which ThreadSanitizer cannot see, so every contended hand-off is reported as a race. TSan
/// intercepts pthread mutexes, and CI runs the transport's tests, with the test kits they use, under it.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written between `pthread_mutex_lock` and `pthread_mutex_unlock`.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

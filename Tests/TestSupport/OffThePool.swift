import Foundation

/// Runs a call that blocks its thread (a socket read, a `waitpid`) on a thread of its own, and awaits it.
///
/// Swift's cooperative pool has as many threads as the machine has cores: two on CI, where every suite of the
/// package runs at once in one process. A test that blocks one of those threads for seconds halves what every other
/// test gets, and two such tests stop them all: wall-clock bounds elsewhere then fail (CI measured a 2 s connect
/// timeout at 12.5 s, and a /healthz probe at 2.96 s, while a broker was started by a blocking `waitpid`).
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// `offThePool` for a call that cannot fail.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

/// Runs `body`, then `teardown` off the pool, whether `body` returned or threw.
///
/// For a teardown that blocks for seconds (stopping a broker): in a `defer` it would hold a thread of the
/// cooperative pool meanwhile (see `offThePool`).
public func withTeardown<T>(
    _ teardown: @escaping @Sendable () -> Void, _ body: () async throws -> T
) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        await offThePool(teardown)
        throw error
    }
    await offThePool(teardown)
    return result
}

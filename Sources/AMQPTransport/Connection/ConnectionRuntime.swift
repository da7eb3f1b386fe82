import Foundation
internal import Locking
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The thread that owns a `ConnectionCore`, and the queue through which async callers reach it.
///
/// librabbitmq is not thread-safe and services heartbeats only while it is called, so each connection
/// gets one dedicated thread that alternates between running queued commands, pumping frames, and
/// sleeping in `poll(2)` on the socket and a wake-up pipe that `submit` writes to.
///
/// `@unchecked Sendable`: the core is only touched on the I/O thread; the command queue is guarded by a
/// mutex; the pipe is a kernel object safe to write from any thread.
final class ConnectionRuntime: @unchecked Sendable {
    typealias Command = @Sendable (ConnectionCore) -> Void

    private struct Queue {
        var commands: [Command] = []
        /// Set when the thread has finished: later submissions fail with this error.
        var terminated: AMQPError?
        /// The connection's socket while it is open (cleared under the lock before the C connection is
        /// destroyed, so `forceSocketShutdown` can never touch a reused descriptor).
        var socketDescriptor: Int32?
    }

    private let queue = Locked(Queue())
    /// Read and write ends of the non-blocking wake-up pipe.
    private let wakeReader: Int32
    private let wakeWriter: Int32

    private init() {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else { fatalError("pipe(2) failed: errno \(errno)") }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        wakeReader = descriptors[0]
        wakeWriter = descriptors[1]
    }

    deinit {
        close(wakeReader)
        close(wakeWriter)
    }

    /// The I/O thread's name, as `top -H`, `perf` and `/proc/PID/task/*/comm` show it: "amqp-io" and the connection
    /// name's last word ("amqp-io publish", "amqp-io consume", "amqp-io reply"). Linux keeps at most 15 bytes of a
    /// thread's name and refuses a longer one, and the thread then keeps its creator's (a dispatch queue's): the
    /// full connection name never showed.
    static func ioThreadName(connectionName: String?) -> String {
        let lastWord = connectionName?.split(separator: " ").last.map(String.init) ?? ""
        var name = lastWord.isEmpty ? "amqp-io" : "amqp-io \(lastWord)"
        while name.utf8.count > 15 { name.removeLast() }
        return name
    }

    /// Gives the calling thread its name in the kernel (at most 15 bytes: `ioThreadName`), through
    /// `/proc/thread-self/comm`: Glibc's module does not export `pthread_setname_np`. Best effort.
    private static func nameCurrentThread(_ name: String) {
        #if os(Linux)
            let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            var bytes = Array(name.utf8)
            _ = write(descriptor, &bytes, bytes.count)
        #endif
    }

    /// Starts the thread, connects on it, and returns once the login has succeeded or failed.
    static func start(
        configuration: AMQPConnectionConfiguration, logger: Logger,
        events: AsyncStream<AMQPConnectionEvent>.Continuation
    ) async throws(AMQPError) -> (runtime: ConnectionRuntime, frameMax: Int) {
        let runtime = ConnectionRuntime()
        let frameMax: Int
        do {
            frameMax = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Int, any Error>) in
                let threadName = ioThreadName(connectionName: configuration.connectionName)
                let thread = Thread {
                    // Named here, by the thread itself: Foundation's `Thread.name` did not reach the kernel on
                    // Linux (`/proc/PID/task/*/comm` kept the creating dispatch thread's name).
                    nameCurrentThread(threadName)
                    let core: ConnectionCore
                    do throws(AMQPError) {
                        core = try ConnectionCore(configuration: configuration, logger: logger, events: events)
                    } catch {
                        runtime.queue.withLock { $0.terminated = error }
                        events.finish()
                        continuation.resume(throwing: error)
                        return
                    }
                    runtime.queue.withLock { $0.socketDescriptor = core.socketDescriptor }
                    continuation.resume(returning: core.frameMax)
                    runtime.run(core)
                }
                thread.name = threadName
                // Generous: librabbitmq and the header copy recurse once per nesting level of a field table,
                // and any publisher can nest headers. Only the pages touched are committed.
                thread.stackSize = 16 << 20
                thread.start()
            }
        } catch let error as AMQPError {
            throw error
        } catch {
            throw AMQPError(code: .connectionFailed, message: "\(error)")
        }
        return (runtime, frameMax)
    }

    /// Queues a command for the I/O thread. Returns the termination error instead when the thread is gone.
    func submit(_ command: @escaping Command) -> AMQPError? {
        let terminated: AMQPError? = queue.withLock { queue in
            if let terminated = queue.terminated { return terminated }
            queue.commands.append(command)
            return nil
        }
        if terminated == nil { wake() }
        return terminated
    }

    /// Runs `body` on the I/O thread and returns its result.
    func perform<T: Sendable>(_ body: @escaping @Sendable (ConnectionCore) throws(AMQPError) -> T)
        async throws(AMQPError) -> T
    {
        do {
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                if let terminated = submit({ core in
                    do throws(AMQPError) {
                        if let failure = core.failure { throw failure }
                        continuation.resume(returning: try body(core))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }) {
                    continuation.resume(throwing: terminated)
                }
            }
        } catch {
            throw error as? AMQPError ?? AMQPError(code: .protocolError, message: "\(error)")
        }
    }

    /// Shuts the socket down from the calling thread, so a C call stuck in send or receive returns with an
    /// error and the I/O thread can finish. The last resort of a bounded `close()`.
    func forceSocketShutdown() {
        queue.withLock { queue in
            if let descriptor = queue.socketDescriptor { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)  // when the pipe is full, the thread is already due to wake
    }

    // MARK: - The I/O thread

    private func run(_ core: ConnectionCore) {
        while true {
            let commands = queue.withLock { queue in
                defer { queue.commands.removeAll(keepingCapacity: true) }
                return queue.commands
            }
            for command in commands { command(core) }
            core.pump()
            if let failure = core.failure {
                terminate(core, failure)
                return
            }
            waitForInput(core)
        }
    }

    /// Refuses new commands, then runs those already queued so each fails with the connection's error.
    private func terminate(_ core: ConnectionCore, _ failure: AMQPError) {
        let leftovers = queue.withLock { queue in
            queue.terminated = failure
            queue.socketDescriptor = nil
            defer { queue.commands.removeAll() }
            return queue.commands
        }
        for command in leftovers { command(core) }
        core.events.finish()
    }

    private func waitForInput(_ core: ConnectionCore) {
        var descriptors = [
            pollfd(fd: core.socketDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&descriptors, 2, core.pollTimeoutMilliseconds)
        guard ready > 0 else { return }
        if descriptors[0].revents != 0 { core.noteInbound() }
        if descriptors[1].revents != 0 {
            var drain = [UInt8](repeating: 0, count: 256)
            while read(wakeReader, &drain, drain.count) > 0 {}
        }
    }
}

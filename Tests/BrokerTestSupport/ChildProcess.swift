import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

// Child processes for the process-level tests: the `wallet-worker` executable (and helpers such as the
// `sqlite3` CLI or `scripts/rabbitmq-local.sh`) started with posix_spawn, their output in a temporary log file
// whose tail every failure message includes. Foundation's `Process.waitUntilExit` has hung in this environment,
// so an exit is waited for on the process's pidfd and reaped with `waitpid` here, and output on the log file's
// inotify events: no wait polls.

/// How a child process ended.
public enum ChildExit: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }

    public init(waitStatus status: Int32) {
        if status & 0x7F == 0 {
            self = .exited((status >> 8) & 0xFF)
        } else {
            self = .signaled(status & 0x7F)
        }
    }
}

/// A spawned process; `stdout` and `stderr` go to `logPath` (or where the caller said), `stdin` optionally
/// from a pipe the test writes to. `kill()` (SIGKILL and reap) is safe to call any number of times: every test
/// calls it in a `defer`, so no process outlives its test.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the mutable state (the reaped status, the stdin descriptor) is guarded by `lock`.
    public let pid: pid_t
    public let label: String
    public let logPath: String
    public let started = ContinuousClock.now
    private let lock = NSLock()
    private var reaped: ChildExit?
    private var stdinDescriptor: Int32?

    public struct SpawnFailed: Error, CustomStringConvertible {
        public var executable: String
        public var errorNumber: Int32
        public var description: String { "posix_spawn \(executable) failed: \(String(cString: strerror(errorNumber)))" }
    }

    /// - Parameters:
    ///   - environment: added to (and overriding) the test process's environment.
    ///   - pipeStandardInput: keep a pipe to the child's stdin open for `write(toStandardInput:)`.
    public init(
        executable: String, arguments: [String], environment: [String: String] = [:], label: String,
        logPath: String? = nil, pipeStandardInput: Bool = false
    ) throws {
        self.label = label
        self.logPath = logPath ?? Self.temporaryPath("\(label).log")
        let argv = [executable] + arguments
        let environmentList = ProcessInfo.processInfo.environment
            .merging(serverOwnerEnvironment) { $1 }
            .merging(environment) { $1 }
            .map { "\($0.key)=\($0.value)" }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var pipeDescriptors: [Int32] = [-1, -1]
        if pipeStandardInput {
            guard pipe(&pipeDescriptors) == 0 else { throw SpawnFailed(executable: executable, errorNumber: errno) }
            posix_spawn_file_actions_adddup2(&actions, pipeDescriptors[0], 0)
            posix_spawn_file_actions_addclose(&actions, pipeDescriptors[0])
            posix_spawn_file_actions_addclose(&actions, pipeDescriptors[1])
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, self.logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)

        var pid: pid_t = 0
        let result = spawnWithCleanSignals(
            &pid, executable: executable, arguments: argv, environment: environmentList, fileActions: &actions)
        if pipeStandardInput { close(pipeDescriptors[0]) }
        guard result == 0 else {
            if pipeStandardInput { close(pipeDescriptors[1]) }
            throw SpawnFailed(executable: executable, errorNumber: result)
        }
        self.pid = pid
        if pipeStandardInput {
            // Writing to a child that has gone must fail with EPIPE, not kill the test process.
            signal(SIGPIPE, SIG_IGN)
            stdinDescriptor = pipeDescriptors[1]
        }
    }

    deinit {
        kill()
    }

    public static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-resilience-\(UUID().uuidString.prefix(8))-\(name)").path
    }

    // MARK: - Signals and exit

    /// Sends `signal` unless the process has already been reaped.
    public func send(_ signal: Int32) {
        lock.withLock {
            if reaped == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// The exit status if the process has ended (reaping it), else nil. Never blocks.
    public func poll() -> ChildExit? {
        lock.withLock {
            if let reaped { return reaped }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                reaped = ChildExit(waitStatus: status)
            } else if result == -1 && errno == ECHILD {
                reaped = .signaled(0)
            }
            return reaped
        }
    }

    public var isRunning: Bool { poll() == nil }

    /// Waits for the process to end; nil when `timeout` passed first (the process is left running). The wait is for
    /// the exit itself (the process's pidfd turns readable when it ends), on a thread of its own; `timeout` only
    /// bounds a hang.
    public func waitForExit(timeout: Duration) async -> (exit: ChildExit, elapsed: Duration)? {
        let start = ContinuousClock.now
        if poll() == nil {
            let deadline = start + timeout
            await offThePool { [self] in waitUntilEnded(until: deadline) }
        }
        return poll().map { ($0, ContinuousClock.now - start) }
    }

    /// Blocks until the process ends (or was reaped already) or `deadline` passes.
    private func waitUntilEnded(until deadline: ContinuousClock.Instant) {
        let descriptor = Self.openPidfd(pid)
        guard descriptor >= 0 else { return }  // reaped already: `poll()` has its status
        defer { close(descriptor) }
        // Reaped between `poll()` and the open, the pid may name another process by now.
        guard lock.withLock({ reaped == nil }) else { return }
        _ = Self.waitUntilReadable(descriptor, until: deadline)
    }

    /// glibc's `pidfd_open` (2.36), which its Swift module does not declare.
    private static func openPidfd(_ pid: pid_t) -> Int32 {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") else {
            preconditionFailure("the tests wait on child processes' pidfds: they need glibc 2.36 and Linux 5.3")
        }
        let open = unsafeBitCast(symbol, to: (@convention(c) (pid_t, UInt32) -> Int32).self)
        return open(pid, 0)
    }

    /// Blocks until `descriptor` is readable (true) or `deadline` passes (false).
    private static func waitUntilReadable(_ descriptor: Int32, until deadline: ContinuousClock.Instant) -> Bool {
        var readable = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            let milliseconds = left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000
            let ready = Glibc.poll(&readable, 1, Int32(clamping: max(1, milliseconds)))
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
    }

    /// SIGKILL and reap. Safe to call again, and on a process that already ended.
    public func kill() {
        closeStandardInput()
        guard poll() == nil else { return }
        send(SIGKILL)
        lock.withLock {
            guard reaped == nil else { return }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            reaped = ChildExit(waitStatus: status)
        }
    }

    // MARK: - Standard input

    public func write(toStandardInput text: String) throws {
        try lock.withLock {
            guard let descriptor = stdinDescriptor else {
                throw ChildProcessError("\(label): its standard input is not a pipe, or was closed")
            }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ChildProcessError(
                        "\(label): writing to its standard input failed: \(String(cString: strerror(errno)))")
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    public func closeStandardInput() {
        lock.withLock {
            if let descriptor = stdinDescriptor { close(descriptor) }
            stdinDescriptor = nil
        }
    }

    // MARK: - Output

    public var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// The last `lines` lines of the output, for failure messages.
    public func logTail(_ lines: Int = 40) -> String {
        let all = log.split(separator: "\n", omittingEmptySubsequences: false)
        return "--- last \(min(lines, all.count)) lines of \(label) (\(logPath)) ---\n"
            + all.suffix(lines).joined(separator: "\n")
    }

    /// Waits until `predicate` holds for the output; returns the output then, nil after `timeout`. The output is read
    /// again each time the log file changes (inotify), on a thread of its own; `timeout` only bounds a hang.
    public func waitForOutput(
        timeout: Duration, _ predicate: @escaping @Sendable (String) -> Bool
    ) async -> String? {
        let (logPath, deadline) = (logPath, ContinuousClock.now + timeout)
        return await offThePool { Self.waitForText(in: logPath, until: deadline, predicate) }
    }

    private static func waitForText(
        in path: String, until deadline: ContinuousClock.Instant, _ predicate: (String) -> Bool
    ) -> String? {
        let changes = inotify_init1(Int32(IN_CLOEXEC))
        guard changes >= 0 else { preconditionFailure("inotify_init1: \(String(cString: strerror(errno)))") }
        defer { close(changes) }
        // Watched before each read: what is written after the read wakes the wait below.
        guard inotify_add_watch(changes, path, UInt32(IN_MODIFY)) >= 0 else { return nil }
        var events = [UInt8](repeating: 0, count: 4_096)
        while true {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if predicate(text) { return text }
            guard waitUntilReadable(changes, until: deadline) else { return nil }
            _ = events.withUnsafeMutableBytes { read(changes, $0.baseAddress, $0.count) }
        }
    }

    public func removeLog() {
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

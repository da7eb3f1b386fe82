import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

// Child processes for the process-level tests: the `wallet-worker` executable (and helpers such as the
// `sqlite3` CLI or `scripts/rabbitmq-local.sh`) started with posix_spawn, their output in a temporary log file
// whose tail every failure message includes. Foundation's `Process.waitUntilExit` has hung in this environment,
// so waiting is done with `waitpid` here.

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

    /// Waits for the process to end; nil when `timeout` passed first (the process is left running).
    public func waitForExit(timeout: Duration) async -> (exit: ChildExit, elapsed: Duration)? {
        let start = ContinuousClock.now
        var exit: ChildExit?
        _ = try? await eventually("\(label) to exit", within: timeout, every: .milliseconds(20)) {
            exit = poll()
            return exit != nil
        }
        return exit.map { ($0, ContinuousClock.now - start) }
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

    /// Polls the output until `predicate` holds for it; returns the output then, nil after `timeout`.
    public func waitForOutput(
        timeout: Duration, _ predicate: (String) -> Bool
    ) async -> String? {
        var text = ""
        do {
            try await eventually("\(label)'s output", within: timeout, every: .milliseconds(25)) {
                text = log
                return predicate(text)
            }
        } catch {
            return nil
        }
        return text
    }

    public func removeLog() {
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

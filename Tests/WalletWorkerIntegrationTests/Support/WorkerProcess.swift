import BrokerTestSupport
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// Child processes for the worker's process-level tests: the `wallet-worker` executable (and helpers such as the
// `sqlite3` CLI or `scripts/rabbitmq-local.sh`) started with posix_spawn, their output in a temporary log file
// whose tail every failure message includes. Foundation's `Process.waitUntilExit` has hung in this environment,
// so waiting is done with `waitpid` here.

/// How a child process ended.
enum ChildExit: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }

    init(waitStatus status: Int32) {
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
final class ChildProcess: @unchecked Sendable {
    // @unchecked: the mutable state (the reaped status, the stdin descriptor) is guarded by `lock`.
    let pid: pid_t
    let label: String
    let logPath: String
    let started = ContinuousClock.now
    private let lock = NSLock()
    private var reaped: ChildExit?
    private var stdinDescriptor: Int32?

    struct SpawnFailed: Error, CustomStringConvertible {
        var executable: String
        var errorNumber: Int32
        var description: String { "posix_spawn \(executable) failed: \(String(cString: strerror(errorNumber)))" }
    }

    /// - Parameters:
    ///   - environment: added to (and overriding) the test process's environment.
    ///   - pipeStandardInput: keep a pipe to the child's stdin open for `write(toStandardInput:)`.
    init(
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

    static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-resilience-\(UUID().uuidString.prefix(8))-\(name)").path
    }

    // MARK: - Signals and exit

    /// Sends `signal` unless the process has already been reaped.
    func send(_ signal: Int32) {
        lock.withLock {
            if reaped == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// The exit status if the process has ended (reaping it), else nil. Never blocks.
    func poll() -> ChildExit? {
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

    var isRunning: Bool { poll() == nil }

    /// Waits for the process to end; nil when `timeout` passed first (the process is left running).
    func waitForExit(timeout: Duration) async -> (exit: ChildExit, elapsed: Duration)? {
        let start = ContinuousClock.now
        var exit: ChildExit?
        _ = try? await eventually("\(label) to exit", within: timeout, every: .milliseconds(20)) {
            exit = poll()
            return exit != nil
        }
        return exit.map { ($0, ContinuousClock.now - start) }
    }

    /// SIGKILL and reap. Safe to call again, and on a process that already ended.
    func kill() {
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

    func write(toStandardInput text: String) throws {
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

    func closeStandardInput() {
        lock.withLock {
            if let descriptor = stdinDescriptor { close(descriptor) }
            stdinDescriptor = nil
        }
    }

    // MARK: - Output

    var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// The last `lines` lines of the output, for failure messages.
    func logTail(_ lines: Int = 40) -> String {
        let all = log.split(separator: "\n", omittingEmptySubsequences: false)
        return "--- last \(min(lines, all.count)) lines of \(label) (\(logPath)) ---\n"
            + all.suffix(lines).joined(separator: "\n")
    }

    /// Polls the output until `predicate` holds for it; returns the output then, nil after `timeout`.
    func waitForOutput(
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

    func removeLog() {
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

struct ChildProcessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// NUL-terminated C strings for `posix_spawn`, valid inside `body`.
// MARK: - The worker executable

/// A `wallet-worker` process (`run`, `declare`, or anything the arguments say), JSON logs in its log file.
final class WorkerProcess: Sendable {
    let process: ChildProcess
    let arguments: [String]

    /// The `wallet-worker` built beside the running test binary (the test target depends on it).
    static var executablePath: String {
        get throws {
            if let path = ProcessInfo.processInfo.environment["WALLET_WORKER_EXECUTABLE"], !path.isEmpty {
                return path
            }
            let testBinary =
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
            var directory = URL(fileURLWithPath: testBinary).deletingLastPathComponent()
            // On some layouts the test binary sits inside an .xctest bundle directory.
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("wallet-worker").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
            throw ChildProcessError(
                "wallet-worker was not found beside the test binary \(testBinary); build it (swift build) "
                    + "or set WALLET_WORKER_EXECUTABLE")
        }
    }

    /// Starts `wallet-worker ARGUMENTS` with `AMQP_URL` set; the process runs until stopped or killed.
    init(_ arguments: [String], amqpURL: String, label: String, environment: [String: String] = [:]) throws {
        self.arguments = arguments
        var environment = environment
        environment["AMQP_URL"] = amqpURL
        process = try ChildProcess(
            executable: try Self.executablePath, arguments: arguments, environment: environment, label: label)
    }

    var pid: pid_t { process.pid }
    var isRunning: Bool { process.isRunning }

    func terminate() { process.send(SIGTERM) }
    func kill() { process.kill() }

    func waitForExit(timeout: Duration) async -> (exit: ChildExit, elapsed: Duration)? {
        await process.waitForExit(timeout: timeout)
    }

    func logTail(_ lines: Int = 40) -> String { process.logTail(lines) }
    var log: String { process.log }

    /// The port of the operations endpoint, from the JSON log line "operations endpoint listening"
    /// (`--http-port 0` lets the system pick one).
    func operationsPort(timeout: Duration = .seconds(30)) async throws -> Int {
        let pattern = "operations endpoint listening"
        guard let text = await process.waitForOutput(timeout: timeout, { $0.contains(pattern) }) else {
            throw ChildProcessError("the worker did not report its operations endpoint within \(timeout)\n\(logTail())")
        }
        for line in text.split(separator: "\n") where line.contains(pattern) {
            if let range = line.range(of: #"http://[^"]*:([0-9]+)"#, options: .regularExpression) {
                let address = line[range]
                if let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) {
                    return port
                }
            }
        }
        throw ChildProcessError("no port in the operations endpoint's log line\n\(logTail())")
    }

    /// Waits until `GET path` answers `status`; throws with the log tail after `timeout`.
    func waitForHTTP(
        port: Int, path: String, status: Int, timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        var last = "no answer"
        try await eventually(
            "GET \(path) to answer \(status) (last: \(last))\n\(logTail())", within: timeout, every: .milliseconds(50)
        ) {
            if let response = try? httpGet(port: port, path: path) {
                if response.status == status { return true }
                last = "\(response.status) \(response.body.prefix(200))"
            }
            if let exit = process.poll() {
                throw ChildProcessError(
                    "the worker \(exit) while waiting for \(path) to answer \(status)\n\(logTail())")
            }
            return false
        }
    }

    /// One metric's value from `/metrics` (the sum over every series whose line starts with `name` and contains
    /// all of `labels`, e.g. `sender="CPS"`); 0 when absent.
    func metric(port: Int, _ name: String, labels: [String] = []) throws -> Double {
        let response = try httpGet(port: port, path: "/metrics")
        return metricValue(in: response.body, name, labels: labels)
    }
}

// MARK: - A tiny HTTP client

struct HTTPResponse {
    var status: Int
    var body: String
}

/// `GET path` from 127.0.0.1:port over a plain socket, `Connection: close`, 3 s socket timeouts.
func httpGet(port: Int, path: String) throws -> HTTPResponse {
    let descriptor: Int32
    do {
        descriptor = try connectToLoopback(port: port, sendTimeout: .seconds(3), receiveTimeout: .seconds(3))
    } catch {
        throw ChildProcessError("\(error)")
    }
    defer { close(descriptor) }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
    let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    guard sent == request.count else { throw ChildProcessError("send to 127.0.0.1:\(port) failed") }
    var reader = SocketReader(descriptor: descriptor)
    let head = reader.readHead()
    if let errorNumber = reader.failure {
        throw ChildProcessError("reading from 127.0.0.1:\(port): \(String(cString: strerror(errorNumber)))")
    }
    guard let head else {
        let text = String(decoding: reader.buffer, as: UTF8.self)
        throw ChildProcessError("not an HTTP response from 127.0.0.1:\(port): \(text.prefix(200))")
    }
    let statusLine = head.split(separator: "\r\n").first ?? ""
    let parts = statusLine.split(separator: " ")
    guard parts.count >= 2, let status = Int(parts[1]) else {
        throw ChildProcessError("bad status line from 127.0.0.1:\(port): \(statusLine)")
    }
    let chunked = head.lowercased().contains("\r\ntransfer-encoding: chunked")
    guard let body = chunked ? reader.readChunkedBody() : reader.readToEnd() else {
        let why = reader.failure.map { String(cString: strerror($0)) } ?? "a chunked body cut short or malformed"
        throw ChildProcessError("reading the body from 127.0.0.1:\(port): \(why)")
    }
    return HTTPResponse(status: status, body: String(decoding: body, as: UTF8.self))
}

import BrokerTestSupport
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

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

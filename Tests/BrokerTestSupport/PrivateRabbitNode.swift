import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A RabbitMQ node of the test's own (scripts/rabbitmq-local.sh on other ports, its own data directory), for
/// tests that stop and start the broker under the worker, or raise a resource alarm that would stall every other
/// test sharing the suite's broker.
public struct PrivateRabbitNode: Sendable {
    public let port: Int
    public let dataDirectory: String
    /// The broker's `consumer_timeout`, checked every second; nil for RabbitMQ's default (30 minutes, checked every
    /// minute).
    public var consumerTimeout: Duration?
    /// The broker's `frame_max`; nil for RabbitMQ's default (131,072 bytes).
    public var frameMax: Int?
    public var url: String { "amqp://guest:guest@127.0.0.1:\(port)/%2f" }

    public init(port: Int, consumerTimeout: Duration? = nil, frameMax: Int? = nil) {
        self.port = port
        self.consumerTimeout = consumerTimeout
        self.frameMax = frameMax
        dataDirectory =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-rabbit-\(port)-\(UUID().uuidString.prefix(8))").path
    }

    private var environment: [String: String] {
        var environment = ["RABBITMQ_PORT": "\(port)", "RABBITMQ_DATA_DIR": dataDirectory]
        if let consumerTimeout {
            environment["RABBITMQ_CONSUMER_TIMEOUT_MS"] = "\(Int(consumerTimeout.inSeconds * 1_000))"
        }
        if let frameMax { environment["RABBITMQ_FRAME_MAX"] = "\(frameMax)" }
        return environment
    }

    /// Runs the script and waits for exactly its process (the broker it leaves in the background writes to its
    /// own log file).
    public func run(_ arguments: String..., timeout: Duration = .seconds(120)) async throws {
        try await runRepositoryScript("rabbitmq-local.sh", arguments, environment: environment, timeout: timeout)
    }

    public func start() async throws { try await run("start") }
    public func stop() async throws { try await run("stop") }

    /// Stops the node and removes its data, blocking; for `withTeardown`, which runs it off the pool (never throws).
    public func destroy() {
        runRepositoryScriptBlocking("rabbitmq-local.sh", ["stop"], environment: environment)
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

/// Runs `scripts/NAME ARGUMENTS` with bash, waits for exactly its process (not for what it leaves in the
/// background), and returns its output (stdout and stderr); throws when it fails or outlasts `timeout`.
@discardableResult
public func runRepositoryScript(
    _ name: String, _ arguments: [String], environment: [String: String], timeout: Duration
) async throws -> String {
    let script = TestBroker.repositoryRoot.appendingPathComponent("scripts/\(name)").path
    let child = try ChildProcess(
        executable: "/bin/bash", arguments: [script] + arguments, environment: environment,
        label: "\(name)-\(arguments.prefix(2).joined(separator: "-"))")
    defer {
        child.kill()
        child.removeLog()
    }
    guard let (exit, _) = await child.waitForExit(timeout: timeout) else {
        throw ChildProcessError("\(name) \(arguments) did not finish in \(timeout)\n\(child.logTail())")
    }
    guard exit == .exited(0) else {
        throw ChildProcessError("\(name) \(arguments) \(exit)\n\(child.logTail())")
    }
    return child.log
}

/// The same, blocking and ignoring the outcome: for a teardown. Run it through `withTeardown` (or `offThePool`),
/// never on a thread of the cooperative pool.
public func runRepositoryScriptBlocking(_ name: String, _ arguments: [String], environment: [String: String]) {
    let script = TestBroker.repositoryRoot.appendingPathComponent("scripts/\(name)").path
    guard
        let child = try? ChildProcess(
            executable: "/bin/bash", arguments: [script] + arguments, environment: environment,
            label: "\(name)-\(arguments.prefix(2).joined(separator: "-"))-blocking")
    else { return }
    var status: Int32 = 0
    while waitpid(child.pid, &status, 0) == -1 && errno == EINTR {}
    child.removeLog()
}

import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

/// connection.blocked needs a broker-wide resource alarm, which would stall every other test sharing the
/// broker, so this suite runs its own RabbitMQ node (scripts/rabbitmq-local.sh on spare ports) and raises a
/// memory alarm there.
///
/// The time limit is for a hang, not a schedule: most of the run is the node's start (the script waits up to 90 s)
/// and three `rabbitmqctl` calls, each booting an Erlang VM. Alone that is about 25 s; beside the whole suite it
/// took 100-145 s, and 2 minutes failed twice.
@Suite("Blocked connections", .timeLimit(.minutes(5)))
struct BlockedConnectionTests {
    /// A private node: started, driven with rabbitmqctl, stopped.
    private struct PrivateBroker {
        let port = 5692
        let dataDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wallet-blocked-test-\(UUID().uuidString.prefix(8))").path

        /// `scripts/rabbitmq-local.sh` of this repository.
        private let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/rabbitmq-local.sh").path

        var url: String { "amqp://guest:guest@127.0.0.1:\(port)/%2f" }

        /// Runs the script off the cooperative pool (starting a broker takes seconds).
        func run(_ arguments: String...) async throws {
            try await offThePool { [self] in try runBlocking(arguments) }
        }

        /// Runs the script and waits for exactly its process. (Foundation's `Process` would also wait for the
        /// broker the script leaves running in the background, which inherits the script's descriptors.)
        private func runBlocking(_ arguments: [String]) throws {
            let argv = ["/bin/bash", script] + arguments
            let environment = ProcessInfo.processInfo.environment
                .merging(serverOwnerEnvironment) { $1 }
                .merging(["RABBITMQ_PORT": "\(port)", "RABBITMQ_DATA_DIR": dataDirectory]) { $1 }
                .map { "\($0.key)=\($0.value)" }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            // Without a clean signal mask the broker would start with SIGTERM blocked and could only be killed.
            var pid: pid_t = 0
            let spawned = spawnWithCleanSignals(
                &pid, executable: "/bin/bash", arguments: argv, environment: environment, fileActions: &actions)
            guard spawned == 0 else { throw BrokerScriptFailed(arguments: arguments, status: spawned) }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            let exitCode = (status >> 8) & 0xFF
            guard status & 0x7F == 0, exitCode == 0 else {
                throw BrokerScriptFailed(arguments: arguments, status: exitCode)
            }
        }

        /// Stops the broker and removes its data, blocking; for `withTeardown`, which runs it off the pool.
        func stop() {
            try? runBlocking(["stop"])
            try? FileManager.default.removeItem(atPath: dataDirectory)
        }
    }

    /// `scripts/rabbitmq-local.sh` could not be started (`status` is posix_spawn's) or exited with `status`.
    private struct BrokerScriptFailed: Error {
        var arguments: [String]
        var status: Int32
    }

    @Test(
        "while the broker blocks the connection, publishes are held and time out on schedule instead of stalling the connection's thread"
    )
    func publishesAreHeldWhileBlocked() async throws {
        let broker = PrivateBroker()
        try await broker.run("start")
        try await withTeardown({ broker.stop() }) {
            var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: broker.url))
            configuration.connectionName = "integration-tests: blocked"
            let connection = try await TestBroker.connect(configuration: configuration)
            let recorder = EventRecorder()
            let watching = recorder.watch(connection)
            let channel = try await connection.openChannel()
            let queue = try await channel.declareQueue(uniqueName("blocked"), durable: false, autoDelete: false).name
            try await channel.enableConfirms()
            try await publishConfirmed([message(to: queue, "before the alarm")], on: channel)

            // A memory alarm: the broker blocks the connection at its next publish and stops reading its socket.
            try await broker.run("ctl", "set_vm_memory_high_watermark", "absolute", "1")
            let first = try await expectAMQPError("a publish into the alarm") {
                try await channel.publish([message(to: queue, "into the alarm")], confirmTimeout: .seconds(2))
            }
            #expect(first.code == .timeout)
            try await waitUntil("connection.blocked to be reported") {
                recorder.recorded.contains { if case .blocked = $0 { true } else { false } }
            }

            // About 20 MB: far more than the socket buffers hold. Written into the socket, it would stall the
            // connection's thread until the alarm clears; held, it times out on schedule.
            let large = (0..<300).map { message(to: queue, String(repeating: "x", count: 65_536) + "\($0)") }
            let started = ContinuousClock.now
            let held = try await expectAMQPError("a large publish while blocked", within: .seconds(8)) {
                try await channel.publish(large, confirmTimeout: .seconds(2))
            }
            #expect(held.code == .timeout)
            #expect(ContinuousClock.now - started < .seconds(5))

            try await broker.run("ctl", "set_vm_memory_high_watermark", "0.4")
            try await waitUntil("connection.unblocked to be reported") {
                recorder.recorded.contains(.unblocked)
            }
            try await publishConfirmed([message(to: queue, "after the alarm")], on: channel)
            try await channel.deleteQueue(queue)
            await connection.close()
            watching.cancel()
        }
    }
}

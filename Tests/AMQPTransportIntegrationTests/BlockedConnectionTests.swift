import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

/// connection.blocked needs a broker-wide resource alarm, which would stall every other test sharing the
/// broker, so this suite runs its own RabbitMQ node (`PrivateRabbitNode`: scripts/rabbitmq-local.sh on spare ports)
/// and raises a memory alarm there.
///
/// The time limit is for a hang, not a schedule: most of the run is the node's start (the script waits up to 90 s)
/// and three `rabbitmqctl` calls, each booting an Erlang VM. Alone that is about 25 s; beside the whole suite it
/// took 100-145 s, and 2 minutes failed twice.
@Suite("Blocked connections", .timeLimit(.minutes(5)))
struct BlockedConnectionTests {
    @Test(
        "while the broker blocks the connection, publishes are held and time out on schedule instead of stalling the connection's thread"
    )
    func publishesAreHeldWhileBlocked() async throws {
        let broker = PrivateRabbitNode(port: 5692)
        try await broker.start()
        try await withTeardown({ broker.destroy() }) {
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

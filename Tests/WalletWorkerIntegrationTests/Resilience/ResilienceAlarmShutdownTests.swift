import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 13: SIGTERM while a broker resource alarm blocks the publish connection, with batches waiting for
    /// their confirms. The drain cannot finish; the grace period ends it, and the cancelled worker must stop within
    /// ServiceLifecycle's 2 s (it waited out the 10 s confirm timeout and was ended with a fatal error before).
    /// An alarm stalls every connection of a broker, so this suite runs a node of its own (port 5732; 5752 is the
    /// end-to-end benchmark's broker).
    @Suite("SIGTERM during a resource alarm", .timeLimit(.minutes(3)))
    struct AlarmShutdown {
        static let port = 5732

        @Test(
            "SIGTERM while a memory alarm blocks the results: exit 0 soon after the grace period, every unacknowledged message back in the queue"
        )
        func sigtermDuringAMemoryAlarm() async throws {
            let node = PrivateRabbitNode(port: Self.port)
            try await withTeardown({ node.destroy() }) {
                try await node.start()
                let database = temporarySQLitePath("alarm")
                defer { removeSQLite(database) }

                try await withResilienceTopology("alarm", url: node.url) { topology, connection, channel in
                    let inbound = (0..<2_000).map { InboundSpec.action("alarm-\($0)", action: "alarm.refresh") }
                    try await channel.enableConfirms()
                    try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)

                    // The alarm blocks every publishing connection; consuming and acknowledging still work.
                    try await node.run("ctl", "set_vm_memory_high_watermark", "0.0000001")
                    let (worker, port) = try await startReadyWorker(
                        workerRunArguments(
                            topology, store: "sqlite:\(database)", prefetch: 100,
                            extra: ["--shutdown-grace", "3s", "--confirm-timeout", "10s"]), amqpURL: node.url,
                        label: "alarm-worker")
                    defer {
                        worker.kill()
                        worker.process.removeLog()
                    }
                    // Batches are stored and their results sent into the blocked connection.
                    try await waitUntil(
                        "the worker took no batch\n\(worker.logTail())", every: .milliseconds(50)
                    ) {
                        try worker.metric(port: port, "wallet_batch_size_count") >= 1
                    }

                    // While the alarm lasts no confirm arrives, so nothing is acknowledged after this.
                    let acknowledged = try worker.metric(port: port, "wallet_messages_total")
                    worker.terminate()
                    let ended = await worker.waitForExit(timeout: .seconds(60))
                    let (exit, elapsed) = try #require(ended, "no exit within 60 s of SIGTERM\n\(worker.logTail())")
                    #expect(exit == .exited(0), "\(worker.logTail())")
                    // A second of slack, not more, failed to cover a loaded runner's exit in other wall-clock bounds;
                    // the promise checked is that no confirm is waited for (its timeout is 10 s here).
                    #expect(
                        elapsed < .seconds(3 + 2 + 3),
                        "SIGTERM took \(elapsed): the grace (3 s) plus the cancellation (2 s)")

                    // Every message the worker did not acknowledge is back in the queue for the next worker.
                    try await node.run("ctl", "set_vm_memory_high_watermark", "0.4")
                    let after = try await TestBroker.connect(purpose: "alarm after", url: node.url)
                    defer { Task { await after.close(timeout: .seconds(2)) } }
                    var ready = 0
                    try await waitUntil(
                        "the unacknowledged messages back: \(ready) ready, \(acknowledged) acknowledged of \(inbound.count)"
                    ) {
                        ready = try await readyCount(topology.work, on: after)
                        return ready == inbound.count - Int(acknowledged)
                    }
                }
            }
        }
    }
}

import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// The operations endpoint of a running worker process, and start-up refusing invalid settings.
    @Suite("Operations endpoint", .timeLimit(.minutes(2)))
    struct Operations {
        @Test(
            "/healthz 200, /readyz 200 when consuming, /metrics counts messages by sender and outcome; SIGTERM then exits 0"
        )
        func healthReadinessAndMetrics() async throws {
            let database = temporarySQLitePath("ops")
            defer { removeSQLite(database) }
            try await withResilienceTopology("ops") { topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: "sqlite:\(database)"), amqpURL: TestBroker.urlText,
                    label: "ops-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                #expect(try httpGet(port: port, path: "/healthz").status == 200)
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                #expect(try httpGet(port: port, path: "/nothing-here").status == 404)

                let inbound: [InboundSpec] = [
                    .cps("ops-1", card: "OPS-1", code: "CBP.info.tokenProvisioned"),
                    .cps("ops-2", card: "OPS-2", code: "CBP.info.tokenProvisioned"),
                    .mg("ops-3", card: "OPS-1"),
                    .mg("ops-4", card: "OPS-404"),  // unknown card: a domain error
                    .action("ops-5", action: "ops.refresh"),
                ]
                try await channel.enableConfirms()
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil("readyCount(topology.capture) >= 7\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= 7
                }

                try await waitUntil(
                    "5 messages counted: \((try? httpGet(port: port, path: "/metrics").body) ?? "")"
                ) {
                    try worker.metric(port: port, "wallet_messages_total") >= 5
                }
                let exposition = try httpGet(port: port, path: "/metrics").body
                func count(_ labels: String...) -> Double {
                    metricValue(in: exposition, "wallet_messages_total", labels: labels)
                }
                #expect(count(#"sender="CPS""#, #"outcome="processed""#) == 2, "\(exposition)")
                #expect(count(#"sender="MG""#, #"outcome="processed""#) == 1, "\(exposition)")
                #expect(count(#"sender="MG""#, #"outcome="domainError""#) == 1, "\(exposition)")
                #expect(count(#"sender="none""#) + count(#"sender="other""#) == 1, "\(exposition)")
                #expect(exposition.contains("wallet_consuming_pipelines 1"), "\(exposition)")
                // The store's and the broker's shares of the processing time: one sample per batch each.
                #expect(
                    metricValue(in: exposition, "wallet_store_batch_seconds_count") >= 1, "\(exposition)")
                #expect(
                    metricValue(in: exposition, "wallet_confirm_wait_seconds_count") >= 1, "\(exposition)"
                )
                #expect(exposition.contains("wallet_build_info{"), "\(exposition)")

                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(0), "\(worker.logTail())")
            }
        }

        @Test(
            "an operations port already in use: exits 1 naming --http-port, after a clean stop; nothing retried or lost"
        )
        func operationsPortInUse() async throws {
            let database = temporarySQLitePath("busy-port")
            defer { removeSQLite(database) }
            let listener = try LoopbackSocket(listening: true)
            defer { listener.close() }
            try await withResilienceTopology("busy-port") { topology, connection, channel in
                let inbound = (0..<400).map { InboundSpec.action("busy-\($0)", action: "ops.refresh") }
                try await channel.enableConfirms()
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)

                let worker = try WorkerProcess(
                    workerRunArguments(
                        topology, store: "sqlite:\(database)", prefetch: 50,
                        extra: ["--http-port", "\(listener.port)"]),
                    amqpURL: TestBroker.urlText, label: "busy-port-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let ended = await worker.waitForExit(timeout: .seconds(40))
                let (exit, _) = try #require(ended, "still running\n\(worker.logTail())")
                // Not a crash (ServiceLifecycle's fatal error when cancellation outlasts its limit is SIGILL).
                #expect(exit == .exited(1), "\(exit)\n\(worker.logTail())")
                #expect(
                    worker.log.contains("--http-port") && worker.log.contains("\(listener.port)"),
                    "the message does not name the setting and the port\n\(worker.logTail())")
                #expect(!worker.log.contains("retry queue"), "\(worker.logTail())")

                // Whatever it took before stopping was acknowledged with its result; the rest is still queued.
                #expect(try await readyCount(topology.retry, on: connection) == 0)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                let waiting = try await readyCount(topology.work, on: connection)
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let accounting = ResultAccounting(results: results, inbound: inbound)
                #expect(accounting.unexpected.isEmpty && accounting.differingDuplicates.isEmpty)
                #expect(
                    accounting.distinctByInbound.count + waiting == inbound.count,
                    "results for \(accounting.distinctByInbound.count), \(waiting) waiting\n\(worker.logTail())")
            }
        }

        @Test(
            "an invalid setting stops the process at start-up with a non-zero status and a message naming the setting",
            arguments: [
                (["--prefetch", "0"], "--prefetch"),
                (["--prefetch", "70000"], "--prefetch"),
                (["--store", "nonsense"], "--store"),
                (["--retry-delay", "soon"], "--retry-delay"),
            ])
        func invalidSettingExitsNonZero(flags: [String], named setting: String) async throws {
            let topology = ResilienceTopology("invalid")
            let worker = try WorkerProcess(
                ["run"] + flags + ["--http-port", "0", "--http-host", "127.0.0.1", "--log-format", "json"]
                    + topology.flags,
                amqpURL: TestBroker.urlText, label: "invalid-worker")
            defer {
                worker.kill()
                worker.process.removeLog()
            }
            let ended = await worker.waitForExit(timeout: .seconds(60))
            let (exit, _) = try #require(ended, "still running with \(flags)\n\(worker.logTail())")
            #expect(exit != .exited(0) && exit != .signaled(SIGKILL), "\(flags): \(exit)\n\(worker.logTail())")
            if case .exited(let code) = exit { #expect(code != 0) }
            #expect(worker.log.contains(setting), "\(flags): the message does not name \(setting)\n\(worker.logTail())")
            #expect(
                flags[1].count < 2 || worker.log.contains(flags[1]),
                "\(flags): the message does not quote the value\n\(worker.logTail())")
        }
    }
}

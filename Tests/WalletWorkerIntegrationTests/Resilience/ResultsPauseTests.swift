// Issue 36: a downstream redeploy (every result exchange left without a bound queue) turned 900 notifications into
// 787 dead letters and 8,774 warning lines. Now the worker pauses: it gives back what it holds, drops readiness, tries
// again on a backoff, and resumes when the results are taken; nothing is dead-lettered for it. This is the one
// end-to-end test of the pause; every row of the rule is `DeliveryLifecycleResultsPauseTests` (the machine) and
// `ExecutorResultsPauseTests` (the executor, in process, on a clock turned by hand).
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    @Suite("Results pause (the result queues unbound, then bound again)", .timeLimit(.minutes(3)))
    struct ResultsPauseTests {
        @Test(
            "with no queue bound to any result exchange the worker pauses within 15 s and dead-letters nothing; bound again, every message's result is delivered once"
        )
        func aDownstreamRedeployPausesTheWorker() async throws {
            try await withResilienceTopology("results-pause") { topology, connection, channel in
                let (worker, port) = try await startReadyWorker(
                    workerRunArguments(topology, store: "memory", prefetch: 50), label: "results-pause-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                try await topology.unbindCapture(on: channel)
                let unbound = ContinuousClock.now
                let before = (0..<150).map { InboundSpec.action("pause-a-\($0)", action: "pause.refresh") }
                let during = (0..<150).map { InboundSpec.action("pause-b-\($0)", action: "pause.refresh") }
                do {
                    try await publishConfirmed(before.map { $0.outbound(to: topology.inbound) }, on: channel)
                    try await worker.waitForHTTP(port: port, path: "/readyz", status: 503, timeout: .seconds(15))
                    let dropped = ContinuousClock.now - unbound
                    #expect(dropped < .seconds(15), "readiness dropped after \(dropped)")
                    #expect(
                        try httpGet(port: port, path: "/readyz").body.contains("paused: results"),
                        "\(worker.logTail())")
                    #expect(try worker.metric(port: port, "wallet_paused", labels: [#"cause="results""#]) == 1)

                    // More arrive while paused, and a trial finds the results still refused.
                    try await publishConfirmed(during.map { $0.outbound(to: topology.inbound) }, on: channel)
                    try await waitUntil("a trial that fails\n\(worker.logTail())", every: .milliseconds(200)) {
                        worker.log.contains("the trial found the results still refused")
                    }
                    #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }

                try await topology.bindCapture(on: channel)
                let expected = Set((before + during).map { "\($0.id)/0" })
                try await waitUntil("every message's result\n\(worker.logTail())", every: .milliseconds(200)) {
                    try await readyCount(topology.capture, on: connection) >= expected.count
                }
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(60))
                #expect(try worker.metric(port: port, "wallet_paused", labels: [#"cause="results""#]) == 0)

                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let ids = results.compactMap(\.properties.messageID)
                #expect(Set(ids) == expected)
                #expect(ids.count == expected.count, "each message's result once: \(ids.count) for \(expected.count)")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                #expect(try worker.metric(port: port, "wallet_dead_letters_total") == 0)

                // The log stays readable: one line to pause, one per trial, one to resume, storms summarised.
                let lines = jsonObjects(worker.log)
                let warnings = lines.filter { ["warning", "error", "critical"].contains($0["level"] as? String) }
                #expect(warnings.count <= 300, "\(warnings.count) warning lines")
                #expect(
                    lines.count {
                        ($0["message"] as? String)?.hasPrefix("every message's results are refused") ?? false
                    }
                        == 1)
                let resumed = lines.filter { $0["message"] as? String == "the results are taken again: resumed" }
                #expect(resumed.count == 1, "\(worker.logTail())")
            }
        }

        /// The same redeploy on a quiet night: three messages, far below the activation count (10 distinct in 10 s),
        /// so the kill switch cannot see it; each goes through its five attempts (200 ms doubling). The old worker
        /// dead-lettered all three within about 3 s. Now the first last attempt refused, with no result taken for
        /// anyone meanwhile, pauses the worker instead.
        @Test(
            "below the activation count, a last attempt refused while no result is taken pauses the worker instead of dead-lettering; bound again, every result is delivered"
        )
        func aQuietNightsRedeployPausesOnTheLastAttempt() async throws {
            try await withResilienceTopology("results-quiet") { topology, connection, channel in
                let (worker, port) = try await startReadyWorker(
                    workerRunArguments(topology, store: "memory", prefetch: 50), label: "results-quiet-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                try await topology.unbindCapture(on: channel)
                let quiet = (0..<3).map { InboundSpec.action("quiet-\($0)", action: "quiet.refresh") }
                do {
                    try await publishConfirmed(quiet.map { $0.outbound(to: topology.inbound) }, on: channel)
                    // Whichever comes first: the pause, or (the old worker's way) a dead letter.
                    try await waitUntil("a pause or a dead letter\n\(worker.logTail())", every: .milliseconds(100)) {
                        let deadLetters = try await readyCount(topology.deadLetterQueue, on: connection)
                        let paused = try worker.metric(port: port, "wallet_paused", labels: [#"cause="results""#])
                        return paused == 1 || deadLetters > 0
                    }
                    #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                    try #require(
                        try worker.metric(port: port, "wallet_paused", labels: [#"cause="results""#]) == 1,
                        "dead-lettered instead of paused")
                    #expect(worker.log.contains("refused on its last attempt (5)"), "\(worker.logTail())")
                    #expect(try worker.metric(port: port, "wallet_retries_total") >= 4, "retried before the pause")
                    #expect(try worker.metric(port: port, "wallet_dead_letters_total") == 0)
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }

                try await topology.bindCapture(on: channel)
                let expected = Set(quiet.map { "\($0.id)/0" })
                try await waitUntil("every message's result\n\(worker.logTail())", every: .milliseconds(100)) {
                    try await readyCount(topology.capture, on: connection) >= expected.count
                }
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(60))
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                #expect(Set(results.compactMap(\.properties.messageID)) == expected)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                #expect(try worker.metric(port: port, "wallet_dead_letters_total") == 0)
            }
        }

        @Test(
            "a disk alarm that outlasts the confirm timeout pauses the worker and dead-letters nothing; once it clears, every message's results are delivered, a result delivered twice is byte-identical"
        )
        func anAlarmThatOutlastsTheConfirmTimeoutPausesTheWorker() async throws {
            let node = PrivateRabbitNode(port: 5752)
            try await withTeardown({ node.destroy() }) {
                try await node.start()
                try await withResilienceTopology("alarm-pause", url: node.url) { topology, connection, channel in
                    let inbound = (0..<1_000).map { InboundSpec.action("alarm-pause-\($0)", action: "alarm.refresh") }
                    try await channel.enableConfirms()
                    try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)

                    // The alarm blocks every connection that publishes: results wait for confirms that do not come.
                    try await node.run("ctl", "set_disk_free_limit", "100000GB")
                    let worker = try WorkerProcess(
                        workerRunArguments(
                            topology, store: "memory", prefetch: 100, extra: ["--confirm-timeout", "2s"]),
                        amqpURL: node.url, label: "alarm-pause-worker")
                    defer {
                        worker.kill()
                        worker.process.removeLog()
                    }
                    let port = try await worker.operationsPort()
                    do {
                        try await waitUntil("paused for the results\n\(worker.logTail())", every: .milliseconds(100)) {
                            try worker.metric(port: port, "wallet_paused", labels: [#"cause="results""#]) == 1
                        }
                        #expect(try httpGet(port: port, path: "/readyz").status == 503)
                        try await waitUntil("a trial that fails\n\(worker.logTail())", every: .milliseconds(200)) {
                            worker.log.contains("the trial found the results still refused")
                        }
                        #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                    } catch {
                        try? await node.run("ctl", "set_disk_free_limit", "50MB")
                        throw error
                    }
                    try await node.run("ctl", "set_disk_free_limit", "50MB")

                    let expected = Set(inbound.map { "\($0.id)/0" })
                    try await waitUntil("every message's result\n\(worker.logTail())", every: .milliseconds(200)) {
                        try await readyCount(topology.capture, on: connection) >= expected.count
                    }
                    try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(90))
                    let results = try await MessageCapture.drain(topology.capture, on: connection)
                    var bodies: [String: [UInt8]] = [:]
                    var different: [String] = []
                    for result in results {
                        guard let id = result.properties.messageID else { continue }
                        if let first = bodies[id], first != result.body { different.append(id) }
                        bodies[id] = bodies[id] ?? result.body
                    }
                    #expect(Set(bodies.keys) == expected)
                    #expect(different.isEmpty, "results delivered twice with different bodies: \(different.prefix(5))")
                    #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                    #expect(try worker.metric(port: port, "wallet_dead_letters_total") == 0)
                    print(
                        "results pause, alarm: \(inbound.count) messages, \(results.count) results "
                            + "(\(results.count - bodies.count) delivered twice, identical)")
                }
            }
        }
    }
}

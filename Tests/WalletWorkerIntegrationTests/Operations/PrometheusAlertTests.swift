import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 15, "get paged when dead letters grow": deploy/'s PrometheusRule, unchanged, evaluated by a real
    /// Prometheus scraping a real worker. promtool's unit tests (scripts/validate-deploy.sh) check the rules on
    /// synthetic series; this checks them on the series the worker really exports, with their real labels.
    @Suite("Alerts", .timeLimit(.minutes(3)))
    struct PrometheusAlertTests {
        @Test(
            "a real Prometheus with deploy's rules stays quiet on a healthy worker, fires WalletRetriesExhausted once transient failures are dead-lettered, and starts WalletDeadLettersGrowing for a sender's bad input, with their runbook links"
        )
        func pagedWhenDeadLettersGrow() async throws {
            let database = temporarySQLitePath("alerts")
            defer { removeSQLite(database) }
            try await withResilienceTopology("alerts") { topology, connection, channel in
                let worker = try await startOneAttemptWorker(topology, database: database, label: "alerts-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()

                let prometheus = try PrometheusServer(scrapingWorkerOn: port)
                defer { prometheus.stop() }
                try await prometheus.waitUntilReady(timeout: .seconds(30))
                // Scraped at least twice with the dead-letter counters at zero, and every rule evaluated since.
                try await waitUntil(
                    "Prometheus did not scrape the worker\n\(prometheus.logTail())", every: .milliseconds(200)
                ) {
                    try prometheus.query(#"count_over_time(wallet_dead_letters_total{reason="rejected"}[1m])"#)
                        .first.map { $0 >= 2 } ?? false
                }
                try await prometheus.waitForEveryRuleGroupEvaluatedAgain()
                let quiet = try prometheus.alerts()
                #expect(quiet.isEmpty, "alerts on a healthy worker: \(quiet.map { "\($0.name) \($0.state)" })")

                // Four notifications fail transiently (their results cannot be routed; one attempt).
                try await channel.enableConfirms()
                let storeFailures = (0..<4).map { InboundSpec.mg("alerts-mg-\($0)", card: "ALERTS-\($0)") }
                try await deadLetterAsTransientFailures(
                    storeFailures, topology: topology, connection: connection, channel: channel, worker: worker)

                try await waitUntil(
                    "WalletRetriesExhausted did not fire: \((try? prometheus.alerts()) ?? [])",
                    every: .milliseconds(250)
                ) {
                    try prometheus.alerts().contains { $0.name == "WalletRetriesExhausted" && $0.state == "firing" }
                }

                // A sender's bad input: twelve bodies that are not JSON, more than the rule's ten in 15 minutes.
                let badOnes = (0..<12).map { index -> InboundSpec in
                    var bad = InboundSpec.action("alerts-bad-\(index)", action: "x")
                    bad.text = #"{"sender":"TNS","oops":"# + "\(index)"
                    return bad
                }
                try await publishConfirmed(badOnes.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil(
                    "readyCount(topology.deadLetterQueue) == 16\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.deadLetterQueue, on: connection) == 16
                }
                // Its `for: 5m` keeps it pending in a test's time: pending is the rule's verdict that it holds.
                var growing: PrometheusServer.Alert?
                try await waitUntil(
                    "WalletDeadLettersGrowing to be evaluated", every: .milliseconds(250)
                ) {
                    growing = try prometheus.alerts().first { $0.name == "WalletDeadLettersGrowing" }
                    return growing != nil
                }
                #expect(growing?.state == "pending", "WalletDeadLettersGrowing: \(String(describing: growing))")
                #expect(growing?.labels["reason"] == "rejected", "\(String(describing: growing))")
                #expect(growing?.labels["severity"] == "warning")

                // WalletStalled's expression, on the series the worker exports: the backlog under the rule's label,
                // and the time since the last message processed (seconds here; it pages past 60 for 2 minutes,
                // which promtool's test shows and `Stall` leaves unwaited).
                #expect(try prometheus.query(#"max(wallet_queue_messages_ready{role="work"})"#).count == 1)
                let sinceProcessed = try prometheus.query("time() - max(wallet_last_processed_timestamp_seconds)")
                #expect(sinceProcessed.count == 1 && sinceProcessed[0] < 60, "\(sinceProcessed)")

                // Each alert names the runbook it comes with.
                let alerts = try prometheus.alerts()
                for alert in alerts {
                    #expect(
                        alert.annotations["runbook"]?.hasPrefix("docs/operations.md#runbook-dead-letters") == true,
                        "\(alert.name): \(alert.annotations)")
                }
                #expect(
                    Set(alerts.map(\.name)) == ["WalletRetriesExhausted", "WalletDeadLettersGrowing"],
                    "\(alerts.map { "\($0.name) \($0.state) \($0.labels)" })")
                #expect(worker.isRunning)
            }
        }
    }
}

extension Resilience {
    /// Issue 25, "a stalled worker looks healthy": a worker whose store another process holds locked while messages
    /// wait shows the stall in the series WalletStalled reads. That the rule fires on such series (a minute without
    /// progress, then its `for: 2m`) is promtool's unit test (prometheusrule.test.yaml, scripts/validate-deploy.sh);
    /// that a real Prometheus scrapes those series with the rule's labels is the `Alerts` test's. Waiting here for
    /// the real alert cost three minutes of the serialized chain (181.7 s of 613 s, measured 2026-11-28).
    @Suite("Stall", .timeLimit(.minutes(3)))
    struct StallTests {
        @Test(
            "with the store locked and messages waiting, the worker's backlog, in-flight and last-processed metrics show the stall; once the lock is gone the messages are processed and the metrics move again"
        )
        func stalledWorkerShowsTheStall() async throws {
            let database = temporarySQLitePath("stall")
            defer { removeSQLite(database) }
            try await withResilienceTopology("stall") { topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(
                        topology, store: "sqlite:\(database)", prefetch: 10,
                        extra: ["--store-busy-timeout", "60s", "--queue-poll-interval", "1s"]),
                    amqpURL: TestBroker.urlText, label: "stall-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))

                // Healthy first: a few messages processed, the new metrics there.
                try await channel.enableConfirms()
                let first = (0..<5).map { InboundSpec.action("stall-ok-\($0)", action: "stall.ok") }
                try await publishConfirmed(first.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil("the first results captured\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= first.count
                }
                let exposition = try httpGet(port: port, path: "/metrics").body
                for name in [
                    "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                    "process_max_fds", "process_start_time_seconds", "process_virtual_memory_bytes",
                    "wallet_in_flight_deliveries", "wallet_last_processed_timestamp_seconds",
                ] {
                    #expect(exposition.contains("\n\(name) "), "\(name) is not exported")
                }
                let lastProcessed = metricValue(in: exposition, "wallet_last_processed_timestamp_seconds")
                #expect(abs(lastProcessed - Date().timeIntervalSince1970) < 30, "\(lastProcessed)")
                #expect(
                    metricValue(
                        in: exposition, "wallet_store_batch_seconds_count", labels: [#"outcome="committed""#]) >= 1)

                // Another process holds the store's lock; 50 messages wait, 10 of them held by the worker.
                let lockedAt = Date().timeIntervalSince1970
                let lock = try await SQLiteLockHolder(path: database)
                let waiting = (0..<50).map { InboundSpec.action("stall-\($0)", action: "stall.wait") }
                try await publishConfirmed(waiting.map { $0.outbound(to: topology.inbound) }, on: channel)
                do {
                    try await waitUntil(
                        "a batch held and 40 messages ready: "
                            + "\(((try? httpGet(port: port, path: "/metrics").body) ?? "").split(separator: "\n").filter { $0.hasPrefix("wallet_queue") || $0.hasPrefix("wallet_in_flight") })",
                        every: .milliseconds(250)
                    ) {
                        // The batch the store holds (the rest of the prefetch may still wait in the consumer's buffer).
                        try worker.metric(port: port, "wallet_in_flight_deliveries") >= 1
                            && worker.metric(port: port, "wallet_queue_messages_ready", labels: [#"role="work""#]) == 40
                    }
                    // WalletStalled's two inputs: work waiting, and a last-processed time from before the lock.
                    #expect(
                        try worker.metric(port: port, "wallet_queue_messages_ready", labels: [#"role="dead_letter""#])
                            == 0)
                    #expect(try worker.metric(port: port, "wallet_last_processed_timestamp_seconds") <= lockedAt)
                    #expect(worker.isRunning)
                } catch {
                    await lock.release()
                    throw error
                }
                await lock.release()

                // The lock is gone: everything is processed, and the metrics move again.
                try await waitUntil(
                    "readyCount(topology.capture) >= first.count + waiting.count\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.capture, on: connection) >= first.count + waiting.count
                }
                // The backlog gauge is the queue's depth as last polled (every second here).
                try await waitUntil(
                    "nothing in flight nor waiting once the backlog is processed"
                ) {
                    try worker.metric(port: port, "wallet_in_flight_deliveries") == 0
                        && worker.metric(port: port, "wallet_queue_messages_ready", labels: [#"role="work""#]) == 0
                }
                #expect(try worker.metric(port: port, "wallet_last_processed_timestamp_seconds") > lockedAt)
            }
        }
    }
}

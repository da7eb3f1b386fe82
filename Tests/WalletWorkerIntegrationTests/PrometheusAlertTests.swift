import AMQPTransport
import Foundation
import Testing

extension Resilience {
    /// Issue 15, "get paged when dead letters grow": deploy/'s PrometheusRule, unchanged, evaluated by a real
    /// Prometheus scraping a real worker. promtool's unit tests (scripts/validate-deploy.sh) check the rules on
    /// synthetic series; this checks them on the series the worker really exports, with their real labels.
    @Suite("Alerts", .timeLimit(.minutes(3)))
    struct PrometheusAlertTests {
        @Test("a real Prometheus with deploy's rules stays quiet on a healthy worker, fires WalletRetriesExhausted once transient failures are dead-lettered, and starts WalletDeadLettersGrowing for a sender's bad input, with their runbook links")
        func pagedWhenDeadLettersGrow() async throws {
            let database = temporarySQLitePath("alerts")
            defer { removeSQLite(database) }
            try await withResilienceTopology("alerts") { topology, connection, channel in
                let worker = try await startOneAttemptWorker(topology, database: database, label: "alerts-worker")
                defer { worker.kill(); worker.process.removeLog() }
                let port = try await worker.operationsPort()

                let prometheus = try PrometheusServer(scrapingWorkerOn: port)
                defer { prometheus.stop() }
                try await prometheus.waitUntilReady(timeout: .seconds(30))
                // Scraped at least twice with the dead-letter counters at zero, and every rule evaluated since.
                let scraped = try await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
                    try prometheus.query(#"count_over_time(wallet_dead_letters_total{reason="rejected"}[1m])"#)
                        .first.map { $0 >= 2 } ?? false
                }
                try #require(scraped, "Prometheus did not scrape the worker\n\(prometheus.logTail())")
                try await Task.sleep(for: .seconds(2))
                let quiet = try prometheus.alerts()
                #expect(quiet.isEmpty, "alerts on a healthy worker: \(quiet.map { "\($0.name) \($0.state)" })")

                // Four notifications fail transiently (their results cannot be routed; one attempt).
                try await channel.enableConfirms()
                let storeFailures = (0..<4).map { InboundNotification.mg("alerts-mg-\($0)", card: "ALERTS-\($0)") }
                try await deadLetterAsTransientFailures(
                    storeFailures, topology: topology, connection: connection, channel: channel, worker: worker)

                let paged = try await eventually(timeout: .seconds(30), every: .milliseconds(250)) {
                    try prometheus.alerts().contains { $0.name == "WalletRetriesExhausted" && $0.state == "firing" }
                }
                #expect(paged, "WalletRetriesExhausted did not fire: \((try? prometheus.alerts()) ?? [])")

                // A sender's bad input: twelve bodies that are not JSON, more than the rule's ten in 15 minutes.
                let badOnes = (0..<12).map { index -> InboundNotification in
                    var bad = InboundNotification.action("alerts-bad-\(index)", action: "x")
                    bad.body = #"{"sender":"TNS","oops":"# + "\(index)"
                    return bad
                }
                try await publishAll(badOnes.map { $0.outbound(to: topology.inbound) }, on: channel)
                let allDead = try await eventually(timeout: .seconds(30)) {
                    try await readyCount(topology.deadLetterQueue, on: connection) == 16
                }
                try #require(allDead, "\(worker.logTail())")
                // Its `for: 5m` keeps it pending in a test's time: pending is the rule's verdict that it holds.
                var growing: PrometheusServer.Alert?
                _ = try await eventually(timeout: .seconds(30), every: .milliseconds(250)) {
                    growing = try prometheus.alerts().first { $0.name == "WalletDeadLettersGrowing" }
                    return growing != nil
                }
                #expect(growing?.state == "pending", "WalletDeadLettersGrowing: \(String(describing: growing))")
                #expect(growing?.labels["reason"] == "rejected", "\(String(describing: growing))")
                #expect(growing?.labels["severity"] == "warning")

                // Each alert names the runbook it comes with.
                let alerts = try prometheus.alerts()
                for alert in alerts {
                    #expect(alert.annotations["runbook"]?.hasPrefix("README.md#runbook-dead-letters") == true,
                            "\(alert.name): \(alert.annotations)")
                }
                #expect(Set(alerts.map(\.name)) == ["WalletRetriesExhausted", "WalletDeadLettersGrowing"],
                        "\(alerts.map { "\($0.name) \($0.state) \($0.labels)" })")
                #expect(worker.isRunning)
            }
        }
    }
}

import BrokerTestSupport
import Foundation
import TestSupport

/// A real Prometheus (Debian's `prometheus` package; scripts/test.sh installs it) on a loopback port of its own,
/// scraping one worker every second and evaluating deploy/'s PrometheusRule every second.
final class PrometheusServer {
    static let executable = "/usr/bin/prometheus"
    static let ruleFile = TestBroker.repositoryRoot
        .appendingPathComponent("deploy/kubernetes/monitoring/prometheusrule.yaml").path

    let port: Int
    private let directory: URL
    private let process: ChildProcess

    /// An alert as `GET /api/v1/alerts` lists it.
    struct Alert {
        var name: String
        var state: String
        var labels: [String: String]
        var annotations: [String: String]
    }

    init(scrapingWorkerOn workerPort: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw ChildProcessError(
                "\(Self.executable) is missing: the alert tests need Debian's prometheus package (scripts/test.sh installs it)"
            )
        }
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-prometheus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let rules = directory.appendingPathComponent("rules.yaml")
        try Self.ruleGroups(ofPrometheusRule: String(contentsOfFile: Self.ruleFile, encoding: .utf8))
            .write(to: rules, atomically: true, encoding: .utf8)
        let configuration = directory.appendingPathComponent("prometheus.yml")
        try """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        rule_files: ["\(rules.path)"]
        scrape_configs:
          - job_name: wallet-worker
            static_configs:
              - targets: ["127.0.0.1:\(workerPort)"]
        """.write(to: configuration, atomically: true, encoding: .utf8)

        // The system picks a free port; it is closed again for Prometheus to take.
        let (listener, freePort) = try listenOnLoopback()
        close(listener)
        port = freePort
        process = try ChildProcess(
            executable: Self.executable,
            arguments: [
                "--config.file=\(configuration.path)",
                "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
                "--web.listen-address=127.0.0.1:\(port)",
            ],
            label: "prometheus")
    }

    /// The `spec:` of the PrometheusRule manifest is a plain Prometheus rule file, indented by two spaces.
    static func ruleGroups(ofPrometheusRule manifest: String) throws -> String {
        let lines = manifest.split(separator: "\n", omittingEmptySubsequences: false)
        guard let spec = lines.firstIndex(of: "spec:") else {
            throw ChildProcessError("\(ruleFile) has no top-level spec:")
        }
        return lines[(spec + 1)...].map { $0.hasPrefix("  ") ? String($0.dropFirst(2)) : String($0) }
            .joined(separator: "\n")
    }

    func waitUntilReady(timeout: Duration) async throws {
        try await eventually("prometheus to be ready\n\(logTail())", within: timeout) {
            if let exit = process.poll() { throw ChildProcessError("prometheus \(exit)\n\(logTail())") }
            return (try? httpGet(port: port, path: "/-/ready"))?.status == 200
        }
    }

    /// The values of an instant query's vector result.
    func query(_ expression: String) throws -> [Double] {
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? expression
        let data = try successData(path: "/api/v1/query?query=\(encoded)")
        let result = (data as? [String: Any])?["result"] as? [[String: Any]] ?? []
        return result.compactMap { (($0["value"] as? [Any])?.last as? String).flatMap(Double.init) }
    }

    /// The alerts pending or firing now.
    func alerts() throws -> [Alert] {
        let data = try successData(path: "/api/v1/alerts")
        let alerts = (data as? [String: Any])?["alerts"] as? [[String: Any]] ?? []
        return alerts.map { alert in
            let labels = alert["labels"] as? [String: String] ?? [:]
            return Alert(
                name: labels["alertname"] ?? "", state: alert["state"] as? String ?? "", labels: labels,
                annotations: alert["annotations"] as? [String: String] ?? [:])
        }
    }

    /// Each rule group's last evaluation (`/api/v1/rules`' `lastEvaluation`), by the group's name.
    func ruleGroupEvaluations() throws -> [String: String] {
        let data = try successData(path: "/api/v1/rules")
        let groups = (data as? [String: Any])?["groups"] as? [[String: Any]] ?? []
        return Dictionary(
            groups.map { ($0["name"] as? String ?? "", $0["lastEvaluation"] as? String ?? "") },
            uniquingKeysWith: { $1 })
    }

    /// Waits until every rule group has been evaluated again since this call: its alerts are then those of the
    /// series as they are now.
    func waitForEveryRuleGroupEvaluatedAgain() async throws {
        let before = try ruleGroupEvaluations()
        try await waitUntil(
            "every rule group evaluated again since \(before)\n\(logTail())", every: .milliseconds(100)
        ) {
            let now = try ruleGroupEvaluations()
            return !now.isEmpty && Set(now.keys) == Set(before.keys) && now.allSatisfy { before[$0.key] != $0.value }
        }
    }

    private func successData(path: String) throws -> Any? {
        let response = try httpGet(port: port, path: path)
        guard response.status == 200,
            let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any],
            object["status"] as? String == "success"
        else { throw ChildProcessError("GET \(path): \(response.status) \(response.body.prefix(300))") }
        return object["data"]
    }

    func logTail(_ lines: Int = 30) -> String { process.logTail(lines) }

    func stop() {
        process.kill()
        process.removeLog()
        try? FileManager.default.removeItem(at: directory)
    }
}

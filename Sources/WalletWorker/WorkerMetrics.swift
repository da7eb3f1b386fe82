import Prometheus
import Synchronization
import WalletRouting

/// The worker's Prometheus metrics, in a registry of its own (no global bootstrap: tests build many workers).
/// Label values are bounded: `sender` is one of CPS, TNS, MG, installation, other, none.
public final class WorkerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry

    let batchSize: ValueHistogram
    let processingTime: DurationHistogram
    let processingLag: DurationHistogram
    let redeliveries: Counter
    let replays: Counter
    let withoutMessageID: Counter
    let retries: Counter
    let reconnects: Counter
    let unroutableReplyCopies: Counter
    let consumingPipelines: Gauge
    let blockedConnections: Gauge
    private let messagesByLabel: Mutex<[String: Counter]> = Mutex([:])

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        batchSize = registry.makeValueHistogram(
            descriptor: Self.name(
                "batch", unit: "size",
                help: "Deliveries processed together: one store transaction, one confirmed publish, one acknowledgement"),
            buckets: [1, 5, 10, 25, 50, 100, 200, 300, 500])
        processingTime = registry.makeDurationHistogram(
            descriptor: Self.name(
                "processing", unit: "seconds", help: "From a batch's arrival to its acknowledgement, once per message"),
            buckets: [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                .seconds(2.5), .seconds(5), .seconds(10),
            ])
        processingLag = registry.makeDurationHistogram(
            descriptor: Self.name(
                "processing_lag", unit: "seconds",
                help: "From the inbound message's AMQP timestamp to its acknowledgement (messages with a timestamp)"),
            buckets: [
                .milliseconds(10), .milliseconds(100), .seconds(1), .seconds(5), .seconds(30), .seconds(60),
                .seconds(300), .seconds(1800),
            ])
        redeliveries = registry.makeCounter(
            descriptor: Self.name("redeliveries", unit: "total", help: "Deliveries the broker marked redelivered"))
        replays = registry.makeCounter(
            descriptor: Self.name(
                "replays", unit: "total",
                help: "Messages whose message_id was already processed: recorded results republished, nothing applied"))
        withoutMessageID = registry.makeCounter(
            descriptor: Self.name(
                "messages_without_message_id", unit: "total", help: "Messages processed without deduplication"))
        retries = registry.makeCounter(
            descriptor: Self.name(
                "retries", unit: "total", help: "Messages sent to the retry queue after a transient failure"))
        reconnects = registry.makeCounter(
            descriptor: Self.name("reconnects", unit: "total", help: "Broker sessions started again after a failure"))
        unroutableReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_unroutable", unit: "total", help: "reply_to copies the broker returned (no such queue)"))
        consumingPipelines = registry.makeGauge(
            descriptor: Self.name("consuming_pipelines", unit: "", help: "Pipelines consuming the work queue now"))
        blockedConnections = registry.makeGauge(
            descriptor: Self.name(
                "blocked_connections", unit: "", help: "Connections the broker has blocked (resource alarm)"))
    }

    /// `wallet_<name>_<unit>`.
    private static func name(_ name: String, unit: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "wallet", metricName: name, unitName: unit, helpText: help)
    }

    /// Counts a finished message by sender and outcome.
    func countMessage(sender: String?, isInstallation: Bool, outcome: Outcome) {
        counter("messages", labels: [("sender", Self.senderLabel(sender, isInstallation)), ("outcome", outcome.rawValue)],
                help: "Messages finished, by sender and outcome (processed, domainError, ignored, rejected)")
            .increment()
    }

    func countDeadLetter(reason: DeadLetterReason) {
        counter("dead_letters", labels: [("reason", reason.rawValue)],
                help: "Messages the worker published to the dead-letter exchange")
            .increment()
    }

    func countConfirms(_ outcome: String, by amount: Int) {
        guard amount > 0 else { return }
        counter("publish_confirms", labels: [("outcome", outcome)],
                help: "Publisher confirm outcomes: confirmed, nacked, returned, timeout")
            .increment(by: Int64(amount))
    }

    enum DeadLetterReason: String {
        case rejected
        case retriesExhausted = "retries_exhausted"
    }

    private func counter(_ name: String, labels: [(String, String)], help: String) -> Counter {
        let key = name + labels.map { "|\($0.1)" }.joined()
        return messagesByLabel.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: Self.name(name, unit: "total", help: help), labels: labels)
            counters[key] = counter
            return counter
        }
    }

    static func senderLabel(_ sender: String?, _ isInstallation: Bool) -> String {
        if isInstallation { return "installation" }
        switch sender {
        case "CPS", "TNS", "MG": return sender!
        case nil: return "none"
        default: return "other"
        }
    }

    /// The Prometheus text exposition.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

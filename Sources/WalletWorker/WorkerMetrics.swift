import AMQPTransport
import Prometheus
import WalletRouting

/// The worker's Prometheus metrics, in a registry of its own (no global bootstrap: tests build many workers).
/// Label values are bounded: `sender` is one of CPS, TNS, MG, installation, other, none.
public final class WorkerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry

    let batchSize: ValueHistogram
    let processingTime: DurationHistogram
    let processingLag: DurationHistogram
    let storeBatchTime: DurationHistogram
    let confirmWait: DurationHistogram
    let redeliveries: Counter
    let replays: Counter
    let withoutMessageID: Counter
    let retries: Counter
    let reconnects: Counter
    let unroutableReplyCopies: Counter
    let topologySkips: Counter
    let skippedReplyCopies: Counter
    let lostReplyCopies: Counter
    let delayedRequeues: Counter
    let storeAvailable: Gauge
    let storeOutages: Counter
    let consumingPipelines: Gauge
    let blockedConnections: Gauge
    private let messages: [SenderLabel: [Outcome: Counter]]
    private let deadLetters: [DeadLetterReason: Counter]
    private let confirms: [ConfirmOutcome: Counter]

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        messages = Dictionary(uniqueKeysWithValues: SenderLabel.allCases.map { sender in
            (sender, Dictionary(uniqueKeysWithValues: Outcome.allCases.map { outcome in
                (outcome, registry.makeCounter(
                    descriptor: Self.name(
                        "messages", unit: "total",
                        help: "Messages finished, by sender and outcome (processed, domainError, ignored, rejected)"),
                    labels: [("sender", sender.rawValue), ("outcome", outcome.rawValue)]))
            }))
        })
        deadLetters = Self.labelled(
            registry, "dead_letters", label: "reason", help: "Messages dead-lettered: published to the dead-letter exchange, or (rejected_to_broker) rejected for the broker to dead-letter",
            DeadLetterReason.self)
        confirms = Self.labelled(
            registry, "publish_confirms", label: "outcome",
            help: "Publisher confirm outcomes: confirmed, nacked, returned, timeout", ConfirmOutcome.self)
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
        let latencyBuckets: [Duration] = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .seconds(2.5), .seconds(5), .seconds(10),
        ]
        storeBatchTime = registry.makeDurationHistogram(
            descriptor: Self.name(
                "store_batch", unit: "seconds",
                help: "One store transaction for a batch, failed ones included (the store's share of the processing time)"),
            buckets: latencyBuckets)
        confirmWait = registry.makeDurationHistogram(
            descriptor: Self.name(
                "confirm_wait", unit: "seconds",
                help: "Waiting for the broker's publisher confirms of a batch's messages (the broker's share)"),
            buckets: latencyBuckets)
        processingLag = registry.makeDurationHistogram(
            descriptor: Self.name(
                "processing_lag", unit: "seconds",
                help: "From the inbound message's AMQP timestamp to its acknowledgement (messages with a timestamp)"),
            // Whole seconds: the AMQP timestamp has no fraction, so a finer bucket would only measure rounding.
            buckets: [
                .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(120),
                .seconds(300), .seconds(900), .seconds(1800), .seconds(3600),
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
                "reply_copies_unroutable", unit: "total",
                help: "reply_to copies the broker returned (no such reply queue; direct reply-to copies are not mandatory)"))
        topologySkips = registry.makeCounter(
            descriptor: Self.name(
                "topology_skipped_queues", unit: "total",
                help: "Retry or dead-letter queues the broker could not declare (404: home node down), skipped until the next reconnect"))
        skippedReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_skipped", unit: "total",
                help: "reply_to copies not published: a direct reply-to address RabbitMQ could not decode"))
        lostReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_lost", unit: "total",
                help: "Direct reply-to copies lost with their connection (the broker closed it, e.g. 541 on an unknown address)"))
        delayedRequeues = registry.makeCounter(
            descriptor: Self.name(
                "requeues_delayed", unit: "total",
                help: "Deliveries requeued after a delay because their retry or dead-letter publish failed too"))
        storeAvailable = registry.makeGauge(
            descriptor: Self.name(
                "store_available", unit: "", help: "1 while the store answers; 0 while the pipelines hold their batches for it"))
        storeOutages = registry.makeCounter(
            descriptor: Self.name(
                "store_outages", unit: "total", help: "Times the store stopped answering and consumption paused"))
        consumingPipelines = registry.makeGauge(
            descriptor: Self.name("consuming_pipelines", unit: "", help: "Pipelines consuming the work queue now"))
        blockedConnections = registry.makeGauge(
            descriptor: Self.name(
                "blocked_connections", unit: "", help: "Connections the broker has blocked (resource alarm)"))
        // 1, with what is running in its labels: a dashboard or an alert can tell versions apart during a rollout.
        registry.makeGauge(
            descriptor: Self.name("build", unit: "info", help: "The worker's version, librabbitmq's and Swift's"),
            labels: [
                ("version", WorkerVersion.current), ("librabbitmq", AMQPLibrary.version), ("swift", WorkerVersion.swift),
            ]
        ).set(1.0)
    }

    /// `wallet_<name>_<unit>`.
    private static func name(_ name: String, unit: String, help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "wallet", metricName: name, unitName: unit, helpText: help)
    }

    /// Counts a finished message by sender and outcome.
    func countMessage(sender: String?, isInstallation: Bool, outcome: Outcome) {
        messages[SenderLabel(sender, isInstallation: isInstallation)]![outcome]!.increment()
    }

    func countDeadLetter(reason: DeadLetterReason) {
        deadLetters[reason]!.increment()
    }

    func countConfirms(_ outcome: ConfirmOutcome, by amount: Int) {
        guard amount > 0 else { return }
        confirms[outcome]!.increment(by: Int64(amount))
    }

    /// Bounded label values: a `sender` is user input, so anything but the three SDK senders is `other`.
    enum SenderLabel: String, CaseIterable {
        case cps = "CPS", tns = "TNS", mg = "MG", installation, other, none

        init(_ sender: String?, isInstallation: Bool) {
            if isInstallation {
                self = .installation
            } else if let sender {
                self = Self(rawValue: sender).flatMap { [.cps, .tns, .mg].contains($0) ? $0 : nil } ?? .other
            } else {
                self = .none
            }
        }
    }

    enum DeadLetterReason: String, CaseIterable {
        case rejected
        case retriesExhausted = "retries_exhausted"
        case storeRefused = "store_refused"
        case poison
        case rejectedToBroker = "rejected_to_broker"
        case unpublishable
    }

    enum ConfirmOutcome: String, CaseIterable {
        case confirmed, nacked, returned, timeout, unencodable
    }

    /// Every labelled counter is made up front: counting is then a lookup in an immutable table, no lock.
    private static func labelled<Label: RawRepresentable & CaseIterable & Hashable>(
        _ registry: PrometheusCollectorRegistry, _ name: String, label: String, help: String, _: Label.Type
    ) -> [Label: Counter] where Label.RawValue == String {
        Dictionary(uniqueKeysWithValues: Label.allCases.map { value in
            (value, registry.makeCounter(
                descriptor: Self.name(name, unit: "total", help: help), labels: [(label, value.rawValue)]))
        })
    }

    /// The Prometheus text exposition.
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

import AMQPTransport
import Foundation
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
    /// One store transaction per batch, by outcome: `committed`, or `failed` (a transient failure, retried).
    private let storeBatchTime: [StoreBatchOutcome: DurationHistogram]
    let confirmWait: DurationHistogram
    let redeliveries: Counter
    let replays: Counter
    let withoutMessageID: Counter
    let withoutTimestamp: Counter
    let retries: Counter
    let reconnects: Counter
    let unroutableReplyCopies: Counter
    let topologySkips: Counter
    let skippedReplyCopies: Counter
    let lostReplyCopies: Counter
    let closedReplyConnections: Counter
    let delayedRequeues: Counter
    let storeAvailable: Gauge
    let storeOutages: Counter
    /// Store checks (a write that rolls back), passed and failed: a failed one starts an outage, and while the store
    /// is out each probe is one.
    let storeChecksPassed: Counter
    let storeChecksFailed: Counter
    /// `wallet_paused{cause}`: 1 while that dependency keeps the worker paused.
    let paused: [PauseCause: Gauge]
    /// `wallet_results_pauses_total`: times the results' side paused the worker (a trial that fails again is the same
    /// pause). The gauge above can miss a pause shorter than a scrape; this cannot.
    let resultsPauses: Counter
    let consumingPipelines: Gauge
    let blockedConnections: Gauge
    /// When a message was last processed (results confirmed, delivery acknowledged); the start until then.
    let lastProcessed: Gauge
    /// Broker logins refused (403 ACCESS_REFUSED, 530 NOT_ALLOWED) after the first: a rotated password, a vhost gone.
    let brokerLoginRefusals: Counter
    /// Spans the tracer did not export, by why (`FinishedSpanQueue`, `SpanExporter`).
    private let spansDropped: [SpanDropReason: Counter]
    /// Deliveries taken into a batch and not yet acknowledged, summed over the sessions' in-flight batches.
    private let inFlight: InFlightDeliveries
    /// The depth of the queues the worker reads and feeds (`QueueDepthMonitor`), made once their names are known.
    private let queueGauges = Mutex<[String: (ready: Gauge, consumers: Gauge)]>([:])
    private let messages: [SenderLabel: [Outcome: Counter]]
    private let deadLetters: [DeadLetterReason: Counter]
    private let confirms: [ConfirmOutcome: Counter]
    /// `wallet_publish_confirms_total{outcome="returned", exchange}`, made at an exchange's first return: the worker
    /// publishes only to its own topology's exchanges and to `reply_to` queues through the default one, so the set
    /// stays small.
    private let returnedByExchange = Mutex<[String: Counter]>([:])

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        messages = Dictionary(
            uniqueKeysWithValues: SenderLabel.allCases.map { sender in
                (
                    sender,
                    Dictionary(
                        uniqueKeysWithValues: Outcome.allCases.map { outcome in
                            (
                                outcome,
                                registry.makeCounter(
                                    descriptor: Self.name(
                                        "messages", unit: "total",
                                        help:
                                            "Messages finished, by sender and outcome (processed, domainError, ignored, rejected)"
                                    ),
                                    labels: [("sender", sender.rawValue), ("outcome", outcome.rawValue)])
                            )
                        })
                )
            })
        deadLetters = Self.labelled(
            registry, "dead_letters", label: "reason",
            help:
                """
                Messages dead-lettered: published to the dead-letter exchange, or (rejected_to_broker) \
                rejected for the broker to dead-letter
                """,
            DeadLetterReason.self)
        confirms = Self.labelled(
            registry, "publish_confirms", label: "outcome", help: Self.confirmsHelp, ConfirmOutcome.self)
        batchSize = registry.makeValueHistogram(
            descriptor: Self.name(
                "batch", unit: "size",
                help: "Deliveries processed together: one store transaction, one confirmed publish, one acknowledgement"
            ),
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
        storeBatchTime = Dictionary(
            uniqueKeysWithValues: StoreBatchOutcome.allCases.map { outcome in
                (
                    outcome,
                    registry.makeDurationHistogram(
                        descriptor: Self.name(
                            "store_batch", unit: "seconds",
                            help:
                                """
                                One store transaction for a batch, by outcome: committed, or failed \
                                (transient, tried again); the store's share of the processing time
                                """
                        ),
                        labels: [("outcome", outcome.rawValue)],
                        buckets: latencyBuckets)
                )
            })
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
        withoutTimestamp = registry.makeCounter(
            descriptor: Self.name(
                "messages_without_timestamp", unit: "total",
                help:
                    "Messages processed without an AMQP timestamp (kombu and Celery send none): not in wallet_processing_lag_seconds"
            ))
        retries = registry.makeCounter(
            descriptor: Self.name(
                "retries", unit: "total", help: "Messages sent to the retry queue after a transient failure"))
        reconnects = registry.makeCounter(
            descriptor: Self.name("reconnects", unit: "total", help: "Broker sessions started again after a failure"))
        unroutableReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_unroutable", unit: "total",
                help:
                    "reply_to copies the broker returned (no such reply queue; direct reply-to copies are not mandatory)"
            ))
        topologySkips = registry.makeCounter(
            descriptor: Self.name(
                "topology_skipped_queues", unit: "total",
                help:
                    "Retry or dead-letter queues the broker could not declare (404: home node down), skipped until the next reconnect"
            ))
        skippedReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_skipped", unit: "total",
                help: "reply_to copies not published: a direct reply-to address RabbitMQ could not decode"))
        lostReplyCopies = registry.makeCounter(
            descriptor: Self.name(
                "reply_copies_lost", unit: "total",
                help:
                    "Direct reply-to copies lost with their connection (the broker closed it, e.g. 541 on an unknown address)"
            ))
        closedReplyConnections = registry.makeCounter(
            descriptor: Self.name(
                "reply_connections_closed", unit: "total",
                help: "Direct reply-to connections the broker closed (541 on an address it cannot resolve)"))
        delayedRequeues = registry.makeCounter(
            descriptor: Self.name(
                "requeues_delayed", unit: "total",
                help: "Deliveries requeued after a delay because their retry or dead-letter publish failed too"))
        storeAvailable = registry.makeGauge(
            descriptor: Self.name(
                "store_available", unit: "",
                help: "1 while the store answers; 0 while the pipelines hold their batches for it"))
        storeOutages = registry.makeCounter(
            descriptor: Self.name(
                "store_outages", unit: "total", help: "Times the store stopped answering and consumption paused"))
        let storeChecks = Self.name(
            "store_checks", unit: "total",
            help: "Store checks (a write that rolls back) by outcome: while the store is out, each probe is one")
        storeChecksPassed = registry.makeCounter(descriptor: storeChecks, labels: [("outcome", "passed")])
        storeChecksFailed = registry.makeCounter(descriptor: storeChecks, labels: [("outcome", "failed")])
        paused = Dictionary(
            uniqueKeysWithValues: PauseCause.allCases.map { cause in
                let gauge = registry.makeGauge(
                    descriptor: Self.name(
                        "paused", unit: "",
                        help:
                            "1 while the cause (store, results) keeps the worker paused: it gives back what it holds and takes no more"
                    ), labels: [("cause", cause.rawValue)])
                gauge.set(0.0)
                return (cause, gauge)
            })
        resultsPauses = registry.makeCounter(
            descriptor: Self.name(
                "results_pauses", unit: "total",
                help:
                    "Times every message's results were refused and the worker paused (a trial that fails again is the same pause)"
            ))
        consumingPipelines = registry.makeGauge(
            descriptor: Self.name("consuming_pipelines", unit: "", help: "Pipelines consuming the work queue now"))
        blockedConnections = registry.makeGauge(
            descriptor: Self.name(
                "blocked_connections", unit: "", help: "Connections the broker has blocked (resource alarm)"))
        lastProcessed = registry.makeGauge(
            descriptor: Self.name(
                "last_processed_timestamp", unit: "seconds",
                help:
                    """
                    Unix time a message was last processed (its results confirmed and its delivery \
                    acknowledged); the worker's start until the first. time() minus it grows while the worker \
                    is stuck
                    """
            ))
        lastProcessed.set(Date().timeIntervalSince1970)
        brokerLoginRefusals = registry.makeCounter(
            descriptor: Self.name(
                "broker_login_refusals", unit: "total",
                help:
                    """
                    Broker logins refused (403 ACCESS_REFUSED, 530 NOT_ALLOWED) after the worker had logged \
                    in once: credentials rotated or a vhost removed; the pipelines keep trying
                    """
            ))
        spansDropped = Self.labelled(
            registry, "spans_dropped", label: "reason",
            help:
                """
                Spans not exported: queue_full (the exporter's queue, OTEL_BSP_MAX_QUEUE_SIZE, was full), \
                export_failed (the collector did not take a batch in time)
                """,
            SpanDropReason.self)
        inFlight = InFlightDeliveries(
            gauge: registry.makeGauge(
                descriptor: Self.name(
                    "in_flight_deliveries", unit: "",
                    help:
                        "Deliveries taken into a batch and not yet acknowledged, requeued or given back (all pipelines)"
                )))
        // 1, with what is running in its labels: a dashboard or an alert can tell versions apart during a rollout.
        registry.makeGauge(
            descriptor: Self.name("build", unit: "info", help: "The worker's version, librabbitmq's and Swift's"),
            labels: [
                ("version", WorkerVersion.current), ("librabbitmq", AMQPLibrary.version),
                ("swift", WorkerVersion.swift),
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

    /// Counts publishes the broker returned (`basic.return`, unroutable) by the exchange they were published to:
    /// which downstream has no queue bound says which team to call.
    func countReturned(exchange: String, by amount: Int) {
        guard amount > 0 else { return }
        let counter = returnedByExchange.withLock { counters in
            if let existing = counters[exchange] { return existing }
            let made = registry.makeCounter(
                descriptor: Self.name("publish_confirms", unit: "total", help: Self.confirmsHelp),
                labels: [("outcome", "returned"), ("exchange", exchange.isEmpty ? "amq.default" : exchange)])
            counters[exchange] = made
            return made
        }
        counter.increment(by: Int64(amount))
    }

    private static let confirmsHelp =
        "Publisher confirm outcomes: confirmed, nacked, returned (by exchange), timeout, unencodable"

    /// A batch's store transaction and how it ended.
    func recordStoreBatch(_ elapsed: Duration, committed: Bool) {
        storeBatchTime[committed ? .committed : .failed]!.record(elapsed)
    }

    /// A message was processed (routed and stored, its results confirmed, its delivery acknowledged or rejected to
    /// the broker): `wallet_last_processed_timestamp_seconds` moves to `now`. Retried, requeued or poison deliveries
    /// are not progress.
    func recordProcessed(at now: Date) {
        lastProcessed.set(now.timeIntervalSince1970)
    }

    /// A broker session ended with `error`; a refused login is counted (the first connection's is fatal instead:
    /// `BrokerLogin`).
    func recordSessionFailure(_ error: any Error) {
        if BrokerLogin.isRefusal(error) { brokerLoginRefusals.increment() }
    }

    /// Spans not exported: the queue was full, or the collector did not take their batch.
    func countDroppedSpans(_ count: Int, reason: SpanDropReason) {
        guard count > 0 else { return }
        spansDropped[reason]!.increment(by: Int64(count))
    }

    /// Counts the deliveries `count` returns in `wallet_in_flight_deliveries` until `end()` is called on the result:
    /// a session registers its in-flight batches once, and the gauge is read at each scrape.
    func trackInFlight(_ count: @escaping @Sendable () -> Int) -> InFlightDeliveries.Registration {
        inFlight.register(count)
    }

    /// A queue's depth as the broker reported it (`queue.declare` passive): ready messages and consumers.
    func recordQueueDepth(queue: String, role: QueueRole, ready: UInt32, consumers: UInt32) {
        let gauges = queueGauges.withLock { gauges in
            if let existing = gauges[queue] { return existing }
            let labels = [("queue", queue), ("role", role.rawValue)]
            let made = (
                ready: registry.makeGauge(
                    descriptor: Self.name(
                        "queue_messages_ready", unit: "",
                        help:
                            """
                            Messages ready in a queue the worker reads or feeds (role: work, retry, \
                            dead_letter), as the broker reported it (polled)
                            """
                    ),
                    labels: labels),
                consumers: registry.makeGauge(
                    descriptor: Self.name(
                        "queue_consumers", unit: "",
                        help: "Consumers of a queue the worker reads or feeds, as the broker reported it (polled)"),
                    labels: labels)
            )
            gauges[queue] = made
            return made
        }
        gauges.ready.set(Double(ready))
        gauges.consumers.set(Double(consumers))
    }

    enum StoreBatchOutcome: String, CaseIterable {
        case committed, failed
    }

    enum SpanDropReason: String, CaseIterable {
        case queueFull = "queue_full"
        case exportFailed = "export_failed"
        /// The collector took the batch but rejected some of its spans (OTLP's partial success).
        case rejected
    }

    /// What a polled queue is to the worker.
    enum QueueRole: String, CaseIterable {
        /// The work queue, or a shard of the ordered mode: what waits here is the backlog.
        case work
        /// A retry level: messages waiting for their next attempt, on purpose.
        case retry
        case deadLetter = "dead_letter"
    }

    /// Bounded label values: a `sender` is user input, so anything but the three SDK senders is `other`.
    enum SenderLabel: String, CaseIterable {
        case cps = "CPS"
        case tns = "TNS"
        case mg = "MG"
        case installation, other, none

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

    /// The outcomes counted without an exchange label; a return is counted by its exchange (`countReturned`).
    enum ConfirmOutcome: String, CaseIterable {
        case confirmed, nacked, timeout, unencodable
    }

    /// Every labelled counter is made up front: counting is then a lookup in an immutable table, no lock.
    private static func labelled<Label: RawRepresentable & CaseIterable & Hashable>(
        _ registry: PrometheusCollectorRegistry, _ name: String, label: String, help: String, _: Label.Type
    ) -> [Label: Counter] where Label.RawValue == String {
        Dictionary(
            uniqueKeysWithValues: Label.allCases.map { value in
                (
                    value,
                    registry.makeCounter(
                        descriptor: Self.name(name, unit: "total", help: help), labels: [(label, value.rawValue)])
                )
            })
    }

    /// The Prometheus text exposition: the worker's metrics, then the standard `process_*` ones (read from /proc
    /// at each scrape).
    public func exposition() -> [UInt8] {
        inFlight.refresh()
        var buffer = registry.emitToBuffer()
        buffer += ProcessMetrics.exposition()
        return buffer
    }
}

/// `wallet_in_flight_deliveries`: the sum of what each registered session holds, read when scraped.
final class InFlightDeliveries: Sendable {
    private let gauge: Gauge
    private let counts = Mutex<(next: Int, sources: [Int: @Sendable () -> Int])>((0, [:]))

    init(gauge: Gauge) {
        self.gauge = gauge
        gauge.set(0.0)
    }

    /// Stops counting a session's batches (it ended: what it held was acknowledged or given back).
    struct Registration: Sendable {
        fileprivate let owner: InFlightDeliveries
        fileprivate let key: Int

        func end() {
            _ = owner.counts.withLock { $0.sources.removeValue(forKey: key) }
            owner.refresh()
        }
    }

    func register(_ count: @escaping @Sendable () -> Int) -> Registration {
        let key = counts.withLock { state in
            defer { state.next += 1 }
            state.sources[state.next] = count
            return state.next
        }
        return Registration(owner: self, key: key)
    }

    func refresh() {
        let sources = counts.withLock { Array($0.sources.values) }
        gauge.set(Double(sources.reduce(0) { $0 + $1() }))
    }
}

extension WorkerMetrics {
    /// One series the worker exports: `wallet-worker metrics` lists them for the deploy check (the alerts and the
    /// dashboard may read no other).
    public struct Series: Sendable, Hashable, Encodable {
        public var name: String
        /// counter, gauge, histogram.
        public var type: String
        public var help: String
    }

    /// Every series of `/metrics`, read from a registry made as a running worker makes it: the worker's, those made
    /// once a queue is polled, the operations endpoint's and the `process_*` ones.
    public static func exportedSeries() -> [Series] {
        let metrics = WorkerMetrics()
        metrics.recordQueueDepth(queue: "wallet.notifications.work", role: .work, ready: 0, consumers: 0)
        _ = ConnectionSlots(limit: 1, registry: metrics.registry)
        var help: [String: String] = [:]
        var series: [Series] = []
        for line in String(decoding: metrics.exposition(), as: UTF8.self).split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
            guard words.count >= 4, words[0] == "#" else { continue }
            let name = String(words[2])
            if words[1] == "HELP" {
                help[name] = String(words[3])
            } else if words[1] == "TYPE", !series.contains(where: { $0.name == name }) {
                series.append(Series(name: name, type: String(words[3]), help: help[name] ?? ""))
            }
        }
        return series.sorted { $0.name < $1.name }
    }
}

import Logging
import ServiceLifecycle
import Tracing

/// The worker's tracer and the service that batches and exports its spans, built only when tracing is on.
///
/// The tracer is kept here rather than bootstrapped into `InstrumentationSystem`: the worker's own spans are the
/// only ones wanted, and nothing else in the process (the exporter's HTTP client included) starts spans through it.
/// Logs and metrics stay with the worker's own backends.
struct TracingBackend: Sendable {
    let tracer: any Tracer
    /// Runs in the worker's service group, stopped after the worker, so the last batch's spans are exported; its
    /// shutdown is bounded by `shutdownLimit`.
    let service: any Service

    /// The longest the exporter may take to flush after the worker has drained, on SIGTERM: a collector that takes
    /// the connection and never answers must not hold the pod past its grace period.
    static let shutdownLimit: Duration = .seconds(3)

    static func make(_ settings: TracingSettings, metrics: WorkerMetrics, logger: Logger) throws -> TracingBackend? {
        guard settings.isEnabled else { return nil }
        #if OpenTelemetry
            let transport = try OTLPHTTPTransport(settings: settings.export)
            return make(settings.export, transport: transport, metrics: metrics, logger: logger)
        #else
            throw ConfigurationError(
                "the OTEL_* environment turns tracing on, but this build has no OTLP/HTTP client "
                    + "(built with --disable-default-traits): unset OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_*")
        #endif
    }

    /// The tracer and its exporter over `transport` (tests pass a scripted one).
    static func make(
        _ settings: OTLPExportSettings, transport: any SpanExportTransport, metrics: WorkerMetrics, logger: Logger
    ) -> TracingBackend {
        let queue = FinishedSpanQueue(
            capacity: settings.maxQueueSize, batchSize: settings.maxExportBatchSize,
            dropped: { metrics.countDroppedSpans($0, reason: .queueFull) })
        let request = OTLPTraceRequest(
            resource: OTLPTraceRequest.resource(
                serviceName: settings.serviceName,
                attributes: settings.resourceAttributes.map { ($0.name, $0.value) }),
            scopeName: "wallet-worker", scopeVersion: WorkerVersion.current)
        var exporterLogger = logger
        exporterLogger[metadataKey: "component"] = "span-exporter"
        if let variable = settings.unsupportedCompression {
            exporterLogger.warning(
                "\(variable)=gzip: this build does not compress its exports; spans are exported uncompressed")
        }
        let exporter = SpanExporter(
            queue: queue, request: request, transport: transport, settings: settings, metrics: metrics,
            logger: exporterLogger)
        return TracingBackend(
            tracer: WorkerTracer(sampler: settings.sampler, queue: queue),
            service: BoundedShutdown(exporter, limit: shutdownLimit, logger: logger))
    }
}

/// Runs a service and, once graceful shutdown is asked for, gives it at most `limit` to finish before cancelling
/// it (the exporter's flush to a collector that never answers, in particular).
struct BoundedShutdown: Service {
    let inner: any Service
    let limit: Duration
    let logger: Logger

    init(_ inner: any Service, limit: Duration, logger: Logger) {
        self.inner = inner
        self.limit = limit
        self.logger = logger
    }

    struct Exceeded: Error {}

    func run() async throws {
        let inner = inner
        let limit = limit
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await inner.run()
                return true
            }
            group.addTask {
                // Returns when graceful shutdown begins; throws when the group is cancelled first.
                try await gracefulShutdown()
                try await Task.sleep(for: limit)
                return false
            }
            let finished = try await group.next() ?? true
            group.cancelAll()
            if !finished {
                logger.warning(
                    "the span exporter did not finish within the shutdown limit: the spans it still held are dropped",
                    metadata: ["limit": "\(DurationText.format(limit))"])
            }
        }
    }
}

import Logging
import ServiceLifecycle
import Tracing

#if OpenTelemetry
    import OTel
#endif

/// swift-otel's tracer and the service that batches and exports its spans, built only when tracing is on.
///
/// The tracer is kept here rather than bootstrapped into `InstrumentationSystem`: the worker's own spans are the
/// only ones wanted, and nothing else in the process (the exporter's HTTP client included) starts spans through it.
/// swift-otel reads the rest of its configuration from the `OTEL_*` environment itself (endpoint, headers,
/// timeouts, sampler, batch processor, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); logs and metrics stay
/// with the worker's own backends.
struct TracingBackend: Sendable {
    let tracer: any Tracer
    /// Runs in the worker's service group, stopped after the worker, so the last batch's spans are exported; its
    /// shutdown is bounded by `shutdownLimit`.
    let service: any Service

    /// The batch span processor's defaults, sized for the worker's full speed with every span on (about 3 spans per
    /// message at 5,000 messages per second: the `process`, `store` and `publish` spans of the `full` detail): a
    /// batch every 100 ms of at most 2,048 spans keeps the queue short, and a queue of 16,384 spans holds about a
    /// second of full speed while the collector is slow (three seconds with the default `message` detail). The specification's defaults (5 s, 512, 2,048) drop spans above about 400 messages per second.
    /// The `OTEL_BSP_*` and `OTEL_EXPORTER_OTLP_*TIMEOUT` variables still win.
    static let scheduleDelay: Duration = .milliseconds(100)
    static let maxExportBatchSize = 2_048
    static let maxQueueSize = 16_384
    /// An export that takes longer than this fails (its spans are counted as dropped, `export_failed`).
    static let exportTimeout: Duration = .seconds(5)
    /// The longest the exporter may take to flush after the worker has drained, on SIGTERM: a collector that takes
    /// the connection and never answers must not hold the pod past its grace period.
    static let shutdownLimit: Duration = .seconds(3)
    /// The spans' `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    static let serviceName = "wallet-worker"

    static func make(_ settings: TracingSettings, metrics: WorkerMetrics, logger: Logger) throws -> TracingBackend? {
        guard settings.isEnabled else { return nil }
        #if OpenTelemetry
            var configuration = OTel.Configuration.default
            configuration.serviceName = serviceName  // `OTEL_SERVICE_NAME` overrides it
            configuration.logs.enabled = false
            configuration.metrics.enabled = false
            configuration.traces.batchSpanProcessor.scheduleDelay = scheduleDelay
            configuration.traces.batchSpanProcessor.maxExportBatchSize = maxExportBatchSize
            configuration.traces.batchSpanProcessor.maxQueueSize = maxQueueSize
            configuration.traces.batchSpanProcessor.exportTimeout = exportTimeout
            configuration.traces.otlpExporter.timeout = exportTimeout
            var diagnostics = Logger(label: logger.label) { _ in
                OTelDiagnostics(output: logger.handler, metrics: metrics)
            }
            diagnostics[metadataKey: "component"] = "otel"
            configuration.diagnosticLogger = .custom(diagnostics)
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return TracingBackend(
                tracer: backend.factory, service: BoundedShutdown(backend.service, limit: shutdownLimit, logger: logger)
            )
        #else
            throw ConfigurationError(
                "the OTEL_* environment turns tracing on, but this build has no OpenTelemetry exporter "
                    + "(built with --disable-default-traits): unset OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_*")
        #endif
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

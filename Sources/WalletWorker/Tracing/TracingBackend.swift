import Logging
#if OpenTelemetry
import OTel
#endif
import ServiceLifecycle
import Tracing

/// swift-otel's tracer and the service that batches and exports its spans, built only when tracing is on.
///
/// The tracer is kept here rather than bootstrapped into `InstrumentationSystem`: the worker's own spans are the
/// only ones wanted, and nothing else in the process (the exporter's HTTP client included) starts spans through it.
/// swift-otel reads the rest of its configuration from the `OTEL_*` environment itself (endpoint, headers,
/// timeouts, sampler, batch processor, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`); logs and metrics stay
/// with the worker's own backends.
struct TracingBackend: Sendable {
    let tracer: any Tracer
    /// Runs in the worker's service group, stopped after the worker, so the last batch's spans are exported.
    let service: any Service

    static func make(_ settings: TracingSettings, logger: Logger) throws -> TracingBackend? {
        guard settings.isEnabled else { return nil }
        #if OpenTelemetry
        var configuration = OTel.Configuration.default
        configuration.serviceName = "wallet-worker"  // `OTEL_SERVICE_NAME` overrides it
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        var diagnostics = logger
        diagnostics[metadataKey: "component"] = "otel"
        configuration.diagnosticLogger = .custom(diagnostics)
        let backend = try OTel.makeTracingBackend(configuration: configuration)
        return TracingBackend(tracer: backend.factory, service: backend.service)
        #else
        throw ConfigurationError(
            "the OTEL_* environment turns tracing on, but this build has no OpenTelemetry exporter "
                + "(built with --disable-default-traits): unset OTEL_TRACES_EXPORTER and OTEL_EXPORTER_OTLP_*")
        #endif
    }
}

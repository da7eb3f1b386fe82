import Logging

/// The log handler swift-otel writes its diagnostics to: the worker's own log output, at the worker's level, with
/// two duties of its own.
///
/// - **No secret**: swift-otel logs every `OTEL_*` variable it applies, value included, at info
///   (`environment_value=authorization=Bearer …` for `OTEL_EXPORTER_OTLP_HEADERS`). The values of header variables
///   are masked here whatever their length; every other secret the worker knows is masked by `SecretRedaction`.
/// - **Dropped spans are counted**: swift-otel 1.6 has no metric and no hook for them, only two warnings of its
///   batch span processor, "Spans were dropped this iteration because queue was full" (`dropped_count`) and "Failed
///   to export batch." (`batch_size`); both become `wallet_spans_dropped_total`. The tracing test that stalls the
///   collector fails if a new swift-otel words them otherwise.
///
/// swift-otel sets the diagnostic logger's level from `OTEL_LOG_LEVEL` (default info); the worker's `--log-level`
/// decides instead, and warnings are always seen so the drops are counted whatever the level.
struct OTelDiagnostics: LogHandler {
    /// The worker's handler (text or JSON, with `SecretRedaction`), at the worker's level.
    let output: any LogHandler
    let metrics: WorkerMetrics
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(output: any LogHandler, metrics: WorkerMetrics) {
        self.output = output
        self.metrics = metrics
        metadataProvider = output.metadataProvider
    }

    var logLevel: Logger.Level {
        get { min(output.logLevel, .warning) }
        set {}  // swift-otel's OTEL_LOG_LEVEL: the worker's --log-level decides
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// swift-otel's messages this handler counts (swift-otel 1.6.0's `OTelBatchSpanProcessor`).
    static let queueFullMessage = "Spans were dropped this iteration because queue was full"
    static let exportFailedMessage = "Failed to export batch."
    static let spanProcessor = "OTelBatchSpanProcessor"

    func log(event: LogEvent) {
        var merged = metadata
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        let message = event.message.description
        if merged["component"]?.description == Self.spanProcessor {
            if message == Self.queueFullMessage {
                metrics.countDroppedSpans(Int(merged["dropped_count"]?.description ?? "") ?? 0, reason: .queueFull)
            } else if message == Self.exportFailedMessage {
                metrics.countDroppedSpans(Int(merged["batch_size"]?.description ?? "") ?? 0, reason: .exportFailed)
            }
        }
        if let key = merged["environment_key"]?.description, Self.isSecretVariable(key) {
            for field in ["environment_value", "previous_value", "new_value"] where merged[field] != nil {
                merged[field] = "***"
            }
        }
        guard event.level >= output.logLevel else { return }
        var forwarded = event
        forwarded.metadata = merged
        output.log(event: forwarded)
    }

    /// `OTEL_EXPORTER_OTLP_HEADERS` and its per-signal forms: collector tokens.
    static func isSecretVariable(_ name: String) -> Bool {
        name.hasPrefix("OTEL_EXPORTER_OTLP") && name.hasSuffix("HEADERS")
    }
}

/// Whether the worker exports traces, read from the standard OpenTelemetry environment variables.
///
/// Off unless the environment asks for it: `OTEL_TRACES_EXPORTER=otlp`, or an OTLP endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) without an exporter named. `OTEL_SDK_DISABLED=true`
/// and `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set. The exporter's own settings (endpoint, headers,
/// sampler, batch sizes, `OTEL_SERVICE_NAME`) are in `export`. The worker's own variable, `WALLET_TRACE_DETAIL`, says
/// which spans a message makes.
public struct TracingSettings: Sendable, Hashable {
    /// Export spans over OTLP/HTTP. Default: `false`.
    public var isEnabled: Bool
    /// The OTLP transport (`export`'s), for the start-up log line. Default: `http/protobuf`.
    public var otlpProtocol: String { export.otlpProtocol }
    /// Which spans a message makes. Default: `.message`.
    public var detail: TraceDetail
    /// Where and how spans are exported.
    public var export: OTLPExportSettings

    public static let off = TracingSettings(isEnabled: false, otlpProtocol: "http/protobuf")
    /// The variable `detail` is read from.
    static let detailVariable = "WALLET_TRACE_DETAIL"

    public init(
        isEnabled: Bool, otlpProtocol: String, detail: TraceDetail = .message, export: OTLPExportSettings = .defaults
    ) {
        self.isEnabled = isEnabled
        self.detail = detail
        self.export = export
        self.export.otlpProtocol = otlpProtocol
    }

    /// Reads the OpenTelemetry variables of `environment`; a value this build cannot honour (an exporter other than
    /// `otlp`, the gRPC protocol: the worker is built with OTLP/HTTP only) is an error naming the variable.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingOuterWhitespace, !text.isEmpty else { return nil }
            return text
        }
        // The specification's boolean: only `true` (any case) is true.
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" {
            self = .off
            return
        }
        let exporters = value("OTEL_TRACES_EXPORTER").map {
            $0.split(separator: ",").map { $0.trimmingOuterWhitespace.lowercased() }
        }
        let enabled: Bool
        switch exporters {
        case nil:
            enabled = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil || value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil
        case ["none"]?:
            enabled = false
        case ["otlp"]?:
            enabled = true
        case let other?:
            throw ConfigurationError(
                "OTEL_TRACES_EXPORTER \"\(other.joined(separator: ","))\": expected otlp or none (this build exports OTLP only)"
            )
        }
        guard enabled else {
            self = .off
            return
        }
        // The signal-specific variable wins over the general one, as the OpenTelemetry specification says.
        let protocolVariable =
            value("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") != nil
            ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL"
        let otlpProtocol = value(protocolVariable)?.lowercased() ?? "http/protobuf"
        guard otlpProtocol == "http/protobuf" || otlpProtocol == "http/json" else {
            throw ConfigurationError(
                "\(protocolVariable) \"\(otlpProtocol)\": expected http/protobuf or http/json (this build has no gRPC exporter)"
            )
        }
        let detailText = value(Self.detailVariable)?.lowercased() ?? TraceDetail.message.rawValue
        guard let detail = TraceDetail(rawValue: detailText) else {
            throw ConfigurationError(
                "\(Self.detailVariable) \"\(detailText)\": expected \(TraceDetail.allCases.map(\.rawValue).joined(separator: " or "))"
            )
        }
        self.init(
            isEnabled: true, otlpProtocol: otlpProtocol, detail: detail,
            export: try OTLPExportSettings(environment: environment, otlpProtocol: otlpProtocol))
    }
}

/// Which spans a traced message makes. A message made 3.2 spans with every span on, and each span costs CPU and
/// collector storage (Benchmarks/README.md, "Issue 38"): the detail is opt-in.
public enum TraceDetail: String, Sendable, CaseIterable {
    /// One CONSUMER span per delivery, `process <queue>`, from its receipt to its acknowledgement.
    case message
    /// Also, under it, a CLIENT span for the batch's store transaction and a PRODUCER span per published message,
    /// from the publish to its confirm.
    case full
}

/// Whether the worker exports traces, read from the standard OpenTelemetry environment variables.
///
/// Off unless the environment asks for it: `OTEL_TRACES_EXPORTER=otlp`, or an OTLP endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) without an exporter named. `OTEL_SDK_DISABLED=true`
/// and `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set. The exporter's own settings (endpoint, headers,
/// sampler, batch sizes, `OTEL_SERVICE_NAME`) are read by swift-otel itself when the tracer is built.
public struct TracingSettings: Sendable, Hashable {
    /// Export spans over OTLP/HTTP. Default: `false`.
    public var isEnabled: Bool
    /// The OTLP transport, for the start-up log line. Default: `http/protobuf`.
    public var otlpProtocol: String

    public static let off = TracingSettings(isEnabled: false, otlpProtocol: "http/protobuf")

    public init(isEnabled: Bool, otlpProtocol: String) {
        self.isEnabled = isEnabled
        self.otlpProtocol = otlpProtocol
    }

    /// Reads the OpenTelemetry variables of `environment`; a value this build cannot honour (an exporter other than
    /// `otlp`, the gRPC protocol: the worker is built with OTLP/HTTP only) is an error naming the variable.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingWhitespace, !text.isEmpty else { return nil }
            return text
        }
        // The specification's boolean: only `true` (any case) is true.
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" {
            self = .off
            return
        }
        let exporters = value("OTEL_TRACES_EXPORTER").map {
            $0.split(separator: ",").map { $0.trimmingWhitespace.lowercased() }
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
        self.init(isEnabled: true, otlpProtocol: otlpProtocol)
    }
}

extension StringProtocol {
    fileprivate var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

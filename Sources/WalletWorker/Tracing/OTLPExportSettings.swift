import Foundation

/// Where and how spans are exported, read from the OpenTelemetry SDK's standard variables: the OTLP exporter's
/// (`OTEL_EXPORTER_OTLP_*`, the traces-specific form winning over the general one), the resource's, the sampler's and
/// the batch span processor's. A value that does not parse is an error naming its variable.
public struct OTLPExportSettings: Sendable, Hashable {
    /// The URL spans are posted to. Default: `http://localhost:4318/v1/traces`.
    public var endpoint: String
    /// `http/protobuf` or `http/json`.
    public var otlpProtocol: String
    /// Sent with every export (a collector's token, say): `OTEL_EXPORTER_OTLP_HEADERS`, values percent-decoded.
    public var headers: [Field]
    /// The longest one export request may take. Default: 5 s.
    public var requestTimeout: Duration
    /// The longest an export may take, its retries of a busy collector included (`OTEL_BSP_EXPORT_TIMEOUT`).
    /// Default: 5 s.
    public var exportTimeout: Duration
    /// PEM files: the collector's CA (`OTEL_EXPORTER_OTLP_CERTIFICATE`), the client's certificate and key for mutual
    /// TLS.
    public var certificate: String?
    public var clientCertificate: String?
    public var clientKey: String?
    /// The resource: `service.name` (`OTEL_SERVICE_NAME`) and `OTEL_RESOURCE_ATTRIBUTES`.
    public var serviceName: String
    public var resourceAttributes: [Field]
    var sampler: TraceSampler
    /// The batch span processor: a batch at least every `scheduleDelay`, or as soon as `maxExportBatchSize` spans
    /// wait; at most `maxQueueSize` spans wait (more are dropped and counted).
    public var scheduleDelay: Duration
    public var maxExportBatchSize: Int
    public var maxQueueSize: Int
    /// The variable that asked for gzip (`OTEL_EXPORTER_OTLP_COMPRESSION`), which this build does not do: the
    /// exports go uncompressed, and the worker says so once at start. Nil: none asked, or `none`.
    public var unsupportedCompression: String? = nil

    /// A name and its value (a header, a resource attribute).
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The worker's defaults: the batch span processor is sized for its full speed (about 5,000 spans a second with one
    /// span per message): a batch every 100 ms of at most 2,048 spans keeps the queue short, and a queue of 16,384
    /// spans holds three seconds of full speed while the collector is slow. The specification's defaults (5 s, 512,
    /// 2,048) drop spans above about 400 messages per second.
    public static let defaults = OTLPExportSettings(
        endpoint: "http://localhost:4318/v1/traces", otlpProtocol: "http/protobuf", headers: [],
        requestTimeout: .seconds(5), exportTimeout: .seconds(5), certificate: nil, clientCertificate: nil,
        clientKey: nil, serviceName: "wallet-worker", resourceAttributes: [], sampler: .default,
        scheduleDelay: .milliseconds(100), maxExportBatchSize: 2_048, maxQueueSize: 16_384)

    init(
        endpoint: String, otlpProtocol: String, headers: [Field], requestTimeout: Duration, exportTimeout: Duration,
        certificate: String?, clientCertificate: String?, clientKey: String?, serviceName: String,
        resourceAttributes: [Field], sampler: TraceSampler, scheduleDelay: Duration, maxExportBatchSize: Int,
        maxQueueSize: Int
    ) {
        self.endpoint = endpoint
        self.otlpProtocol = otlpProtocol
        self.headers = headers
        self.requestTimeout = requestTimeout
        self.exportTimeout = exportTimeout
        self.certificate = certificate
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.serviceName = serviceName
        self.resourceAttributes = resourceAttributes
        self.sampler = sampler
        self.scheduleDelay = scheduleDelay
        self.maxExportBatchSize = maxExportBatchSize
        self.maxQueueSize = maxQueueSize
    }

    /// Reads the variables of `environment` over the defaults.
    init(environment: [String: String], otlpProtocol: String) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingOuterWhitespace, !text.isEmpty else { return nil }
            return text
        }
        /// The traces-specific variable, else the general one, with the name of the one read.
        func exporterValue(_ suffix: String) -> (name: String, value: String)? {
            for name in ["OTEL_EXPORTER_OTLP_TRACES_\(suffix)", "OTEL_EXPORTER_OTLP_\(suffix)"] {
                if let text = value(name) { return (name, text) }
            }
            return nil
        }
        /// A delay or timeout: 0 would spin the exporter or fail every export, and a day is past any use.
        func milliseconds(_ name: String, _ text: String) throws(ConfigurationError) -> Duration {
            guard let count = Int(text), (1...86_400_000).contains(count) else {
                throw ConfigurationError(
                    "\(name) \"\(text)\": expected a whole number of milliseconds from 1 to 86400000")
            }
            return .milliseconds(count)
        }
        func positive(_ name: String) throws(ConfigurationError) -> Int? {
            guard let text = value(name) else { return nil }
            guard let count = Int(text), count > 0 else {
                throw ConfigurationError("\(name) \"\(text)\": expected a whole number above 0")
            }
            return count
        }
        var settings = Self.defaults
        settings.otlpProtocol = otlpProtocol
        if let endpoint = value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            settings.endpoint = try Self.checkedURL(endpoint, variable: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        } else if let base = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let url = try Self.checkedURL(base, variable: "OTEL_EXPORTER_OTLP_ENDPOINT")
            settings.endpoint = (url.hasSuffix("/") ? String(url.dropLast()) : url) + "/v1/traces"
        }
        if let (name, text) = exporterValue("HEADERS") {
            settings.headers = try Self.fields(text, variable: name)
        }
        if let (name, text) = exporterValue("TIMEOUT") {
            settings.requestTimeout = try milliseconds(name, text)
        }
        if let text = value("OTEL_BSP_EXPORT_TIMEOUT") {
            settings.exportTimeout = try milliseconds("OTEL_BSP_EXPORT_TIMEOUT", text)
        }
        if let (name, text) = exporterValue("COMPRESSION") {
            switch text.lowercased() {
            case "none": break
            case "gzip": settings.unsupportedCompression = name
            default: throw ConfigurationError("\(name) \"\(text)\": expected gzip or none")
            }
        }
        settings.certificate = exporterValue("CERTIFICATE")?.value
        settings.clientCertificate = exporterValue("CLIENT_CERTIFICATE")?.value
        settings.clientKey = exporterValue("CLIENT_KEY")?.value
        if (settings.clientCertificate == nil) != (settings.clientKey == nil) {
            throw ConfigurationError(
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: set both for mutual TLS, or neither"
            )
        }
        if let text = value("OTEL_RESOURCE_ATTRIBUTES") {
            settings.resourceAttributes = try Self.fields(text, variable: "OTEL_RESOURCE_ATTRIBUTES")
        }
        // The specification: OTEL_SERVICE_NAME, else a service.name among the resource attributes (the last one).
        if let name = value("OTEL_SERVICE_NAME")
            ?? settings.resourceAttributes.last(where: { $0.name == "service.name" })?.value
        {
            settings.serviceName = name
        }
        settings.sampler = try TraceSampler(
            name: value("OTEL_TRACES_SAMPLER"), argument: value("OTEL_TRACES_SAMPLER_ARG"))
        if let text = value("OTEL_BSP_SCHEDULE_DELAY") {
            settings.scheduleDelay = try milliseconds("OTEL_BSP_SCHEDULE_DELAY", text)
        }
        if let size = try positive("OTEL_BSP_MAX_QUEUE_SIZE") { settings.maxQueueSize = size }
        if let size = try positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") { settings.maxExportBatchSize = size }
        // The specification: a batch larger than the queue is the queue.
        settings.maxExportBatchSize = min(settings.maxExportBatchSize, settings.maxQueueSize)
        self = settings
    }

    /// An `http://` or `https://` URL with a host.
    private static func checkedURL(_ text: String, variable: String) throws(ConfigurationError) -> String {
        let lowered = text.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://"),
            let rest = text.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false).dropFirst(2).first,
            !rest.isEmpty
        else {
            throw ConfigurationError("\(variable) \"\(text)\": expected an http:// or https:// URL with a host")
        }
        return text
    }

    /// `key=value,key2=value2`, the W3C Baggage form the OTLP exporter's headers and the resource's attributes use;
    /// values are percent-decoded.
    static func fields(_ text: String, variable: String) throws(ConfigurationError) -> [Field] {
        var fields: [Field] = []
        for member in text.split(separator: ",") {
            let parts = member.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingOuterWhitespace
            guard parts.count == 2, !name.isEmpty, let value = parts[1].trimmingOuterWhitespace.removingPercentEncoding
            else {
                // The member itself is not echoed: it may be a token.
                throw ConfigurationError("\(variable): expected key=value pairs separated by commas")
            }
            fields.append(Field(name, value))
        }
        return fields
    }
}

extension StringProtocol {
    var trimmingOuterWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}

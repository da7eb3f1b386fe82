import Tracing

/// What every export request of a process shares: the resource (`service.name`, `OTEL_RESOURCE_ATTRIBUTES`, the SDK)
/// and the instrumentation scope. Encodes an `ExportTraceServiceRequest` of finished spans, as OTLP/HTTP's protobuf
/// or JSON body (opentelemetry-proto's `collector/trace/v1`, `trace/v1`, `common/v1`).
struct OTLPTraceRequest: Sendable {
    /// The resource's attributes, in order.
    let resource: [(key: String, value: String)]
    let scopeName: String
    let scopeVersion: String

    /// The resource of a process: `service.name` (resolved by `OTLPExportSettings`), the SDK's attributes, then
    /// `OTEL_RESOURCE_ATTRIBUTES`', the last of a repeated key winning; none of them replaces `service.name`.
    static func resource(serviceName: String, attributes: [(key: String, value: String)]) -> [(
        key: String, value: String
    )] {
        var resource: [(key: String, value: String)] = [
            ("service.name", serviceName), ("telemetry.sdk.name", "wallet-notification-worker"),
            ("telemetry.sdk.language", "swift"), ("telemetry.sdk.version", WorkerVersion.current),
        ]
        for attribute in attributes where attribute.key != "service.name" {
            if let index = resource.firstIndex(where: { $0.key == attribute.key }) {
                resource[index].value = attribute.value
            } else {
                resource.append(attribute)
            }
        }
        return resource
    }
}

/// A span attribute's value as OTLP's `AnyValue` has it.
enum OTLPValue {
    case string(String)
    case bool(Bool)
    case int(Int64)
    case double(Double)
    indirect case array([OTLPValue])

    init(_ attribute: SpanAttribute) {
        switch attribute {
        case .int32(let value): self = .int(Int64(value))
        case .int64(let value): self = .int(value)
        case .double(let value): self = .double(value)
        case .bool(let value): self = .bool(value)
        case .string(let value): self = .string(value)
        case .int32Array(let values): self = .array(values.map { .int(Int64($0)) })
        case .int64Array(let values): self = .array(values.map { .int($0) })
        case .doubleArray(let values): self = .array(values.map { .double($0) })
        case .boolArray(let values): self = .array(values.map { .bool($0) })
        case .stringArray(let values): self = .array(values.map { .string($0) })
        case .stringConvertible(let value): self = .string(value.description)
        case .stringConvertibleArray(let values): self = .array(values.map { .string($0.description) })
        default: self = .string("\(attribute)")
        }
    }
}

extension SpanKind {
    /// OTLP's `Span.SpanKind`.
    var otlpValue: UInt64 {
        switch self {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }
}

extension SpanStatus.Code {
    /// OTLP's `Status.StatusCode`.
    var otlpValue: UInt64 {
        switch self {
        case .ok: 1
        case .error: 2
        }
    }
}

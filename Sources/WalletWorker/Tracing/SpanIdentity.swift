import Tracing

/// A 128-bit trace id.
struct TraceID: Hashable, Sendable {
    var high: UInt64
    var low: UInt64

    /// 32 lower-case hex digits.
    var hex: String { LowerHex.string(high) + LowerHex.string(low) }
}

/// Where a span sits in its trace (W3C Trace Context's span context): what its children continue and its log lines
/// carry. Kept in the span's `InstrumentationContext` under `SpanIdentity.Key`.
struct SpanIdentity: Hashable, Sendable {
    var traceID: TraceID
    var spanID: UInt64
    /// The trace flags; bit 0 is `sampled`.
    var flags: UInt8
    /// Whether it came from another process (an inbound `traceparent`).
    var isRemote: Bool

    var isSampled: Bool { flags & 0x01 != 0 }

    /// The context key.
    enum Key: ServiceContextKey {
        typealias Value = SpanIdentity
        static var nameOverride: String? { "wallet-span-identity" }
    }

    /// `trace_id`, `span_id` and `trace_flags`, the names OpenTelemetry's log data model gives them.
    var logMetadata: [String: String] {
        [
            "trace_id": traceID.hex, "span_id": LowerHex.string(spanID),
            "trace_flags": LowerHex.string(UInt64(flags), digits: 2),
        ]
    }
}

extension InstrumentationContext {
    /// The identity of the span this context belongs to, or of the remote parent extracted into it.
    var spanIdentity: SpanIdentity? {
        get { self[SpanIdentity.Key.self] }
        set { self[SpanIdentity.Key.self] = newValue }
    }
}

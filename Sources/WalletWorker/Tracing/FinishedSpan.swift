import Tracing

/// A recorded span once it has ended: what an export carries.
struct FinishedSpan: Sendable {
    var identity: SpanIdentity
    var parentSpanID: UInt64?
    var name: String
    var kind: SpanKind
    var startNanoseconds: UInt64
    var endNanoseconds: UInt64
    var attributes: SpanAttributes
    var status: SpanStatus?
    var events: [SpanEvent]
    var links: [SpanLink]
}

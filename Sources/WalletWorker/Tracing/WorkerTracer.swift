import Synchronization
import Tracing
import WalletMessages

/// The worker's tracer: starts `RecordedSpan`s, continues W3C `traceparent`s, and hands ended spans to the export
/// queue, where `SpanExporter` batches them to the collector.
///
/// It is the worker's own rather than swift-otel's because of what a span costs: swift-otel 1.6 sends every span's
/// start and end through two `AsyncStream`s and an actor and re-sizes each nested protobuf message at every level,
/// about 19 µs of CPU per span before it carries an attribute, which put tracing at 1.65 times the worker's cost
/// with one span per message (Benchmarks/README.md, "Issue 38: where tracing's cost goes"). Here a span is an object
/// with its own lock, its end an append under the queue's lock, and the encoding a single pass (1.14-1.25 times,
/// "Issue 38, continued: a tracer of the worker's own").
final class WorkerTracer: Tracer {
    typealias Span = RecordedSpan

    let sampler: TraceSampler
    let queue: FinishedSpanQueue
    /// Ids need to be unique and spread, not secret: a system call per id (`SystemRandomNumberGenerator`) was a
    /// measurable share of a span's cost, so the system's generator only seeds this one.
    private let ids: Mutex<LifecycleRandom>

    init(sampler: TraceSampler, queue: FinishedSpanQueue) {
        self.sampler = sampler
        self.queue = queue
        var system = SystemRandomNumberGenerator()
        ids = Mutex(LifecycleRandom(seed: system.next()))
    }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> InstrumentationContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> RecordedSpan {
        var context = context()
        let parent = context.spanIdentity
        let (newTraceID, spanID) = ids.withLock { ids in
            (parent == nil ? TraceID(high: ids.nextNonZero(), low: ids.nextNonZero()) : nil, ids.nextNonZero())
        }
        let traceID = parent?.traceID ?? newTraceID!
        let sampled = sampler.shouldSample(traceID: traceID, parent: parent)
        // The parent's other flags (W3C level 2's random-trace-id bit) carry on; the sampled bit is this decision.
        let flags = (parent?.flags ?? 0) & ~0x01 | (sampled ? 0x01 : 0x00)
        let identity = SpanIdentity(traceID: traceID, spanID: spanID, flags: flags, isRemote: false)
        context.spanIdentity = identity
        return RecordedSpan(
            name: operationName, kind: kind, identity: identity, parentSpanID: parent?.spanID, context: context,
            startNanoseconds: instant().nanosecondsSinceEpoch, queue: queue)
    }

    /// Reads `traceparent` from the carrier; a missing or malformed header leaves the context as it was.
    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {
        guard let header = extractor.extract(key: WorkerHeaders.traceparent, from: carrier),
            let identity = TraceParent.parse(header)
        else { return }
        context.spanIdentity = identity
    }

    func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let identity = context.spanIdentity else { return }
        injector.inject(TraceParent.format(identity), forKey: WorkerHeaders.traceparent, into: &carrier)
    }

    /// Exports run on their schedule and at shutdown; nothing is held back to flush.
    func forceFlush() {}
}

extension LifecycleRandom {
    /// A trace or span id: never zero, which W3C Trace Context reserves for "invalid".
    fileprivate mutating func nextNonZero() -> UInt64 {
        while true {
            let value = next()
            if value != 0 { return value }
        }
    }
}

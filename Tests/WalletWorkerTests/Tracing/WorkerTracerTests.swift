import Synchronization
import TestSupport
import Testing
import Tracing

@testable import WalletWorker

/// The worker's tracer: W3C trace context in and out, the sampler's decisions, what a span records and hands to the
/// export queue.
@Suite("The worker's tracer")
struct WorkerTracerTests {
    static let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    private func tracer(_ sampler: TraceSampler = .default, capacity: Int = 100) -> (WorkerTracer, FinishedSpanQueue) {
        let queue = FinishedSpanQueue(capacity: capacity, batchSize: capacity, dropped: { _ in })
        return (WorkerTracer(sampler: sampler, queue: queue), queue)
    }

    private struct HeaderExtractor: Extractor {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }

    private struct HeaderInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    }

    @Test func aSpanContinuesTheInboundTraceparentAndEndsOnceIntoTheQueue() throws {
        let (tracer, queue) = tracer()
        var parent = InstrumentationContext.topLevel
        tracer.extract(["traceparent": Self.traceparent], into: &parent, using: HeaderExtractor())
        let span = tracer.startSpan("process q", context: parent, ofKind: .consumer)
        #expect(span.isRecording)
        span.updateAttributes { $0["messaging.message.id"] = "m-1" }
        span.attributes["wallet.fate"] = "processed"
        span.setStatus(SpanStatus(code: .error, message: "rejected"))
        span.end()
        span.end()  // a second end is ignored
        let finished = queue.takeAll()
        #expect(finished.count == 1)
        let recorded = try #require(finished.first)
        #expect(recorded.identity.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(recorded.parentSpanID == 0x00f0_67aa_0ba9_02b7)
        #expect(recorded.identity.spanID != 0x00f0_67aa_0ba9_02b7 && recorded.identity.spanID != 0)
        #expect(recorded.kind == .consumer && recorded.name == "process q")
        #expect(recorded.attributes["messaging.message.id"]?.toSpanAttribute() == .string("m-1"))
        #expect(recorded.attributes["wallet.fate"]?.toSpanAttribute() == .string("processed"))
        #expect(recorded.status?.code == .error)
        #expect(recorded.endNanoseconds >= recorded.startNanoseconds)

        // Its children continue it, and its context writes it out as a traceparent.
        let child = tracer.startSpan("store transaction", context: span.context, ofKind: .client)
        #expect(child.identity.traceID == recorded.identity.traceID)
        var headers: [String: String] = [:]
        tracer.inject(span.context, into: &headers, using: HeaderInjector())
        #expect(
            headers["traceparent"]
                == "00-4bf92f3577b34da6a3ce929d0e0e4736-\(LowerHex.string(recorded.identity.spanID))-01")
        #expect(MessageTracing.logMetadata(of: span)["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    @Test(
        "a malformed or missing traceparent starts a new trace",
        arguments: [
            nil, "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage",
        ])
    func newRoot(header: String?) {
        let (tracer, _) = tracer()
        var parent = InstrumentationContext.topLevel
        tracer.extract(header.map { ["traceparent": $0] } ?? [:], into: &parent, using: HeaderExtractor())
        let first = tracer.startSpan("a", context: parent, ofKind: .consumer)
        let second = tracer.startSpan("b", context: parent, ofKind: .consumer)
        #expect(first.isRecording)
        #expect(first.identity.traceID != second.identity.traceID, "each root has its own trace")
        #expect(first.identity.traceID.high != 0 || first.identity.traceID.low != 0)
    }

    @Test func theDefaultSamplerFollowsAnUnsampledParentAndRecordsNothing() {
        let (tracer, queue) = tracer()
        var parent = InstrumentationContext.topLevel
        tracer.extract(
            ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"], into: &parent,
            using: HeaderExtractor())
        let span = tracer.startSpan("process q", context: parent, ofKind: .consumer)
        #expect(!span.isRecording)
        span.attributes["x"] = "y"
        span.end()
        #expect(queue.count == 0)
        // The trace goes on in its log lines and children, unsampled.
        #expect(MessageTracing.logMetadata(of: span)["trace_flags"] == "00")
        #expect(span.identity.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    @Test func theRatioSamplerFollowsTheGoSDKsRule() {
        // The last 8 bytes of the trace id, shifted right once, against ratio × 2^63.
        let half = TraceSampler.traceIDRatio(0.5)
        #expect(half.shouldSample(traceID: TraceID(high: .max, low: ((1 << 62) - 1) << 1), parent: nil))
        #expect(!half.shouldSample(traceID: TraceID(high: 0, low: (1 << 62) << 1), parent: nil))
        #expect(half.shouldSample(traceID: TraceID(high: 0, low: 1), parent: nil), "the last bit is shifted out")
        // A trace sampled at a ratio is sampled at every higher one.
        var generator = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let traceID = TraceID(high: generator.next(), low: generator.next())
            if TraceSampler.traceIDRatio(0.3).shouldSample(traceID: traceID, parent: nil) {
                #expect(TraceSampler.traceIDRatio(0.6).shouldSample(traceID: traceID, parent: nil))
            }
        }
    }

    @Test func aChildKeepsItsParentsOtherFlags() {
        let (tracer, _) = tracer()
        var parent = InstrumentationContext.topLevel
        // 03: sampled, and W3C level 2's random trace id.
        tracer.extract(
            ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"], into: &parent,
            using: HeaderExtractor())
        #expect(tracer.startSpan("a", context: parent, ofKind: .consumer).identity.flags == 0x03)
        let (never, _) = self.tracer(.alwaysOff)
        #expect(never.startSpan("b", context: parent, ofKind: .consumer).identity.flags == 0x02)
    }

    @Test func anOKStatusIsFinal() {
        let (tracer, queue) = tracer(.alwaysOn)
        let span = tracer.startSpan("a", context: .topLevel, ofKind: .internal)
        span.setStatus(SpanStatus(code: .ok))
        span.setStatus(SpanStatus(code: .error, message: "late"))
        span.end()
        #expect(queue.takeAll().first?.status?.code == .ok)
    }

    @Test func theRatioSamplerDecidesByTheTraceIDAlone() {
        let half = TraceSampler.traceIDRatio(0.5)
        var generator = SplitMix64(seed: 42)
        var sampled = 0
        for _ in 0..<10_000 {
            let traceID = TraceID(high: generator.next(), low: generator.next())
            let decision = half.shouldSample(traceID: traceID, parent: nil)
            #expect(decision == half.shouldSample(traceID: traceID, parent: nil))
            if decision { sampled += 1 }
        }
        #expect((4_500...5_500).contains(sampled), "\(sampled) of 10,000 at 0.5")
        let any = TraceID(high: 1, low: 2)
        #expect(!TraceSampler.traceIDRatio(0).shouldSample(traceID: any, parent: nil))
        #expect(TraceSampler.traceIDRatio(1).shouldSample(traceID: any, parent: nil))
        let sampledParent = SpanIdentity(traceID: any, spanID: 1, flags: 1, isRemote: true)
        #expect(TraceSampler.parentBased(root: .alwaysOff).shouldSample(traceID: any, parent: sampledParent))
        #expect(!TraceSampler.alwaysOff.shouldSample(traceID: any, parent: sampledParent))
    }

    @Test func aFullQueueDropsAndCounts() {
        let dropped = SharedCount()
        let queue = FinishedSpanQueue(capacity: 2, batchSize: 2, dropped: { dropped.add($0) })
        let tracer = WorkerTracer(sampler: .alwaysOn, queue: queue)
        for name in ["a", "b", "c"] { tracer.startSpan(name, context: .topLevel, ofKind: .internal).end() }
        #expect(queue.takeAll().map(\.name) == ["a", "b"])
        #expect(dropped.value == 1)
    }

    @Test func spansTakenAndNotYetSentCountAgainstTheQueue() {
        let dropped = SharedCount()
        let queue = FinishedSpanQueue(capacity: 3, batchSize: 3, dropped: { dropped.add($0) })
        let tracer = WorkerTracer(sampler: .alwaysOn, queue: queue)
        func end(_ name: String) { tracer.startSpan(name, context: .topLevel, ofKind: .internal).end() }
        ["a", "b", "c"].forEach(end)
        #expect(queue.takeAll().count == 3)
        end("d")  // a stalled export still holds a, b and c
        #expect(dropped.value == 1 && queue.count == 0)
        queue.sent(2)
        ["e", "f", "g"].forEach(end)
        #expect(queue.takeAll().map(\.name) == ["e", "f"])
        #expect(dropped.value == 2)
    }
}

/// A count shared with a closure.
final class SharedCount: Sendable {
    private let count = Mutex(0)
    func add(_ value: Int) { count.withLock { $0 += value } }
    var value: Int { count.withLock { $0 } }
}

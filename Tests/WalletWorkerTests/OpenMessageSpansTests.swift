import InMemoryTracing
import Testing
import Tracing

@testable import WalletWorker

@Suite("Spans of batches a session drops")
struct OpenMessageSpansTests {
    struct SessionLost: Error {}

    @Test("failAll ends, with an error status, the spans of batches not yet at their acknowledgement, once")
    func failAllEndsDroppedBatches() {
        let tracer = InMemoryTracer()
        let open = OpenMessageSpans()
        let acknowledged = open.insert([tracer.startSpan("process acknowledged", ofKind: .consumer)])
        _ = open.insert([
            tracer.startSpan("process dropped", ofKind: .consumer),
            tracer.startSpan("publish dropped", ofKind: .producer),
        ])
        open.remove(acknowledged)

        open.failAll(SessionLost())
        #expect(Set(tracer.finishedSpans.map(\.operationName)) == ["process dropped", "publish dropped"])
        #expect(tracer.finishedSpans.allSatisfy { $0.status?.code == .error && $0.errors.count == 1 })
        #expect(tracer.activeSpans.map(\.operationName) == ["process acknowledged"])

        open.failAll(SessionLost())
        #expect(tracer.finishedSpans.count == 2)
    }
}

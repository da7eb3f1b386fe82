import InMemoryTracing
import Testing
import Tracing

@testable import WalletWorker

/// The spans a traced message makes, by `WALLET_TRACE_DETAIL`: one `process` span by default, the store and publish
/// spans under it only with `full`. On the scripted broker, through an in-memory tracer.
@Suite("Executor: the spans of a traced message", .timeLimit(.minutes(1)))
struct ExecutorTracingTests {
    /// Runs one CPS install (two results) through a worker traced at `detail` and returns its finished spans, once the
    /// worker has stopped (every delivery has ended, so every span has).
    private func spans(detail: TraceDetail) async throws -> [FinishedInMemorySpan] {
        let tracer = InMemoryTracer()
        let worker = InProcessWorker(
            configure: { $0.tracing = TracingSettings(isEnabled: true, otlpProtocol: "http/protobuf", detail: detail) },
            tracer: tracer)
        await worker.waitUntilConsuming()
        worker.broker.deliver([.install("DC-1", id: "m-1")])
        await worker.broker.waitForSettlements(1)
        try await worker.stop()
        return tracer.finishedSpans
    }

    @Test func byDefaultAMessageMakesOneProcessSpan() async throws {
        #expect(TracingSettings(isEnabled: true, otlpProtocol: "http/protobuf").detail == .message)
        let spans = try await spans(detail: .message)
        #expect(spans.map(\.operationName) == ["process wallet.notifications.work"], "\(spans.map(\.operationName))")
        let process = try #require(spans.first)
        #expect(process.kind == .consumer)
        #expect(process.attributes["messaging.message.id"]?.toSpanAttribute() == .string("m-1"))
        #expect(process.attributes["wallet.fate"]?.toSpanAttribute() == .string("processed"))
        #expect(process.attributes["wallet.sender"]?.toSpanAttribute() == .string("CPS"))
    }

    @Test func theFullDetailAddsTheStoreAndPublishSpansUnderIt() async throws {
        let spans = try await spans(detail: .full)
        let process = try #require(spans.first { $0.operationName == "process wallet.notifications.work" })
        let children = spans.filter { $0.parentSpanID == process.spanID }
        #expect(spans.count == 4, "\(spans.map(\.operationName))")
        #expect(children.filter { $0.operationName == "store transaction" && $0.kind == .client }.count == 1)
        let publishes = children.filter { $0.operationName == "publish wallet.events" && $0.kind == .producer }
        #expect(publishes.count == 2, "\(children.map(\.operationName))")
        let ids = publishes.compactMap { span -> String? in
            if case .string(let id) = span.attributes["messaging.message.id"]?.toSpanAttribute() { id } else { nil }
        }
        #expect(ids.sorted() == ["m-1/0", "m-1/1"])
    }
}

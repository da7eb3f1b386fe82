import Logging
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import Tracing

@testable import WalletWorker

/// The batch span processor on a scripted collector: when batches go, what a failed export costs, the flush at
/// shutdown. The schedule is an hour, so only the events under test export anything: no test waits on a timer.
@Suite("The span exporter", .timeLimit(.minutes(1)))
struct SpanExporterTests {
    /// A collector at the exporter's seam: keeps each request's spans, or fails it while `failing` is set, and
    /// answers with a partial success while `rejecting` is set.
    final class ScriptedCollector: SpanExportTransport {
        private let state = Mutex<(batches: [[String]], failing: Bool, rejecting: Int, shutDown: Bool)>(
            ([], false, 0, false))
        let arrivals: AsyncStream<Int>
        private let arrived: AsyncStream<Int>.Continuation

        init() { (arrivals, arrived) = AsyncStream.makeStream(of: Int.self) }

        func send(_ body: [UInt8], contentType: String, deadline: ContinuousClock.Instant) async throws
            -> OTLPPartialSuccess?
        {
            #expect(contentType == "application/x-protobuf")
            let names = try ProtobufReader.spans(ofRequest: body).spans.map {
                try ProtobufReader.string(5, in: $0) ?? ""
            }
            let (failing, rejecting) = state.withLock { state in
                if !state.failing { state.batches.append(names) }
                return (state.failing, state.rejecting)
            }
            arrived.yield(names.count)
            if failing { throw ScriptedFailure() }
            return rejecting > 0 ? OTLPPartialSuccess(rejectedSpans: rejecting, message: "over quota") : nil
        }

        func shutdown() async { state.withLock { $0.shutDown = true } }

        func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }
        func reject(_ count: Int) { state.withLock { $0.rejecting = count } }
        var batches: [[String]] { state.withLock { $0.batches } }
        var isShutDown: Bool { state.withLock { $0.shutDown } }

        struct ScriptedFailure: Error {}
    }

    private final class Running: Sendable {
        let tracer: WorkerTracer
        let collector: ScriptedCollector
        let metrics: WorkerMetrics
        let group: ServiceGroup
        let done = Mutex<Task<Void, any Error>?>(nil)

        init(tracer: WorkerTracer, collector: ScriptedCollector, metrics: WorkerMetrics, group: ServiceGroup) {
            self.tracer = tracer
            self.collector = collector
            self.metrics = metrics
            self.group = group
        }

        func end(_ names: [String]) {
            for name in names { tracer.startSpan(name, context: .topLevel, ofKind: .consumer).end() }
        }

        /// Starts the exporter (when `start` was told not to).
        func run() {
            let group = group
            done.withLock { $0 = Task { try await group.run() } }
        }

        func stop() async throws {
            await group.triggerGracefulShutdown()
            try await done.withLock { $0 }?.value
        }

        var exposition: String { String(decoding: metrics.exposition(), as: UTF8.self) }
    }

    /// The exporter over a scripted collector; with `running` false, spans can be ended before it starts, so what it
    /// finds waiting does not depend on a race with its thread.
    private func start(batchSize: Int, capacity: Int = 100, running: Bool = true) -> Running {
        var settings = OTLPExportSettings.defaults
        settings.scheduleDelay = .seconds(3_600)
        settings.maxExportBatchSize = batchSize
        settings.maxQueueSize = capacity
        settings.sampler = .alwaysOn
        let collector = ScriptedCollector()
        let metrics = WorkerMetrics()
        let logger = Logger(label: "span-exporter-test")
        let backend = TracingBackend.make(settings, transport: collector, metrics: metrics, logger: logger)
        let group = ServiceGroup(services: [backend.service], logger: logger)
        let tracer = backend.tracer as! WorkerTracer
        let started = Running(tracer: tracer, collector: collector, metrics: metrics, group: group)
        if running { started.run() }
        return started
    }

    /// gzip asked for and not done: said once, when the exporter is made, not silently ignored.
    @Test func compressionAskedForIsSaidToBeNotDone() {
        var settings = OTLPExportSettings.defaults
        settings.unsupportedCompression = "OTEL_EXPORTER_OTLP_COMPRESSION"
        let captured = CapturedLog()
        _ = TracingBackend.make(
            settings, transport: ScriptedCollector(), metrics: WorkerMetrics(),
            logger: captured.logger(level: .info))
        #expect(
            captured.all.map(\.message) == [
                "OTEL_EXPORTER_OTLP_COMPRESSION=gzip: this build does not compress its exports; spans are exported "
                    + "uncompressed"
            ])
        _ = TracingBackend.make(
            .defaults, transport: ScriptedCollector(), metrics: WorkerMetrics(), logger: captured.logger(level: .info))
        #expect(captured.all.count == 1, "nothing said when none is asked for")
    }

    @Test func aFullBatchGoesWithoutWaitingForTheSchedule() async throws {
        let running = start(batchSize: 3)
        var arrivals = running.collector.arrivals.makeAsyncIterator()
        running.end(["a", "b", "c"])
        #expect(await arrivals.next() == 3)
        #expect(running.collector.batches == [["a", "b", "c"]])
        try await running.stop()
    }

    @Test func gracefulShutdownExportsWhatIsLeftInBatchesThenStops() async throws {
        let running = start(batchSize: 4)
        running.end(["a", "b"])
        try await running.stop()
        #expect(running.collector.batches == [["a", "b"]])
        #expect(running.collector.isShutDown)
    }

    @Test func aBatchTheCollectorRefusesIsDroppedAndCountedAndTheNextOneGoes() async throws {
        let running = start(batchSize: 2)
        var arrivals = running.collector.arrivals.makeAsyncIterator()
        running.collector.fail(true)
        running.end(["a", "b"])
        #expect(await arrivals.next() == 2)
        running.collector.fail(false)
        running.end(["c", "d"])
        #expect(await arrivals.next() == 2)
        #expect(running.collector.batches == [["c", "d"]])
        #expect(
            running.exposition.contains(#"wallet_spans_dropped_total{reason="export_failed"} 2"#),
            "\(running.exposition)")
        try await running.stop()
    }

    @Test func whatWaitsGoesInBatchesOfTheBatchSizeInOrder() async throws {
        let running = start(batchSize: 3, running: false)
        running.end((0..<10).map { "s\($0)" })
        running.run()
        try await running.stop()
        #expect(running.collector.batches.map(\.count) == [3, 3, 3, 1])
        #expect(running.collector.batches.flatMap { $0 } == (0..<10).map { "s\($0)" })
    }

    @Test func spansTheCollectorRejectsOfABatchItTookAreCounted() async throws {
        let running = start(batchSize: 2)
        var arrivals = running.collector.arrivals.makeAsyncIterator()
        running.collector.reject(1)
        running.end(["a", "b"])
        #expect(await arrivals.next() == 2)
        try await running.stop()
        #expect(
            running.exposition.contains(#"wallet_spans_dropped_total{reason="rejected"} 1"#), "\(running.exposition)")
    }

    @Test func spansBeyondTheQueueAreDroppedAndCounted() async throws {
        let running = start(batchSize: 10, capacity: 3, running: false)
        running.end(["a", "b", "c", "d", "e"])
        running.run()
        try await running.stop()
        #expect(running.collector.batches == [["a", "b", "c"]])
        #expect(
            running.exposition.contains(#"wallet_spans_dropped_total{reason="queue_full"} 2"#), "\(running.exposition)")
    }
}

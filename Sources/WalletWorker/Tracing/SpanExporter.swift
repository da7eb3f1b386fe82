import Logging
import ServiceLifecycle
import Synchronization

/// Sends one encoded export request to the collector, retrying a busy one until `deadline`; throws when the request
/// failed for good, returns the spans the collector rejected of a batch it took (nil when it took them all).
/// `OTLPHTTPTransport` in production; tests script one.
protocol SpanExportTransport: Sendable {
    func send(_ body: [UInt8], contentType: String, deadline: ContinuousClock.Instant) async throws
        -> OTLPPartialSuccess?
    func shutdown() async
}

/// The batch span processor: takes the ended spans off `FinishedSpanQueue` at least every `scheduleDelay` (sooner
/// when a batch is waiting), encodes each batch once and hands it to the transport. A batch the collector does not
/// take within the export timeout is dropped and counted (`wallet_spans_dropped_total{reason="export_failed"}`);
/// the spans keep nothing of the messages' processing waiting. On graceful shutdown, after the worker has drained
/// (it runs after the worker in the service group), it exports what is left, then stops.
struct SpanExporter: Service {
    let queue: FinishedSpanQueue
    let request: OTLPTraceRequest
    let transport: any SpanExportTransport
    let settings: OTLPExportSettings
    let metrics: WorkerMetrics
    let logger: Logger
    private let warnings = WarningThrottle()

    init(
        queue: FinishedSpanQueue, request: OTLPTraceRequest, transport: any SpanExportTransport,
        settings: OTLPExportSettings, metrics: WorkerMetrics, logger: Logger
    ) {
        self.queue = queue
        self.request = request
        self.transport = transport
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    func run() async throws {
        let queue = queue
        let delay = settings.scheduleDelay
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The schedule: a ring every `scheduleDelay`, beside the queue's own when a batch is waiting.
                while !Task.isCancelled {
                    try? await Task.sleep(for: delay)
                    queue.ring()
                }
            }
            await withGracefulShutdownHandler {
                for await _ in queue.wakeups { await exportWaiting() }
            } onGracefulShutdown: {
                queue.close()
            }
            group.cancelAll()
        }
        await exportWaiting()  // what ended before the shutdown: the worker has drained by now
        await transport.shutdown()
    }

    /// Exports every span waiting, a batch at a time. Once cancelled (the shutdown limit passed), what is left is
    /// counted as not exported rather than encoded for a request that cannot be sent.
    func exportWaiting() async {
        while true {
            let waiting = queue.takeAll()
            guard !waiting.isEmpty else { return }
            var start = 0
            while start < waiting.count {
                let end = min(start + queue.batchSize, waiting.count)
                if Task.isCancelled {
                    metrics.countDroppedSpans(waiting.count - start, reason: .exportFailed)
                    queue.sent(waiting.count - start)
                    break
                }
                await export(Array(waiting[start..<end]))
                queue.sent(end - start)
                start = end
            }
        }
    }

    private func export(_ batch: [FinishedSpan]) async {
        let json = settings.otlpProtocol == "http/json"
        let body = json ? request.json(batch) : request.protobuf(batch)
        let deadline = ContinuousClock.now.advanced(by: settings.exportTimeout)
        do {
            let partial = try await transport.send(
                body, contentType: json ? "application/json" : "application/x-protobuf", deadline: deadline)
            if let partial {
                metrics.countDroppedSpans(partial.rejectedSpans, reason: .rejected)
                if let heldBack = warnings.shouldWrite() {
                    logger.warning(
                        "the collector rejected spans of a batch it took",
                        metadata: [
                            "rejected_spans": "\(partial.rejectedSpans)", "spans": "\(batch.count)",
                            "endpoint": "\(settings.endpoint)", "collector_message": "\(partial.message)",
                            "failed_exports_not_logged": "\(heldBack)",
                        ])
                }
            }
        } catch {
            metrics.countDroppedSpans(batch.count, reason: .exportFailed)
            if let heldBack = warnings.shouldWrite() {
                logger.warning(
                    "a batch of spans could not be exported: its spans are dropped",
                    metadata: [
                        "spans": "\(batch.count)", "endpoint": "\(settings.endpoint)", "error": "\(error)",
                        "failed_exports_not_logged": "\(heldBack)",
                    ])
            }
        }
    }
}

/// At most one warning a minute about failed exports, so a collector that is down does not write ten a second;
/// `wallet_spans_dropped_total` keeps the count.
private final class WarningThrottle: Sendable {
    private let state = Mutex<(warnings: RepeatedWarnings, clock: ContinuousClock.Instant)>(
        (RepeatedWarnings(), ContinuousClock.now))
    private static let kind = RepeatedWarnings.Kind("span export failed")

    /// The failures held back since the last line when this one is to be written; nil when it is held back.
    func shouldWrite() -> Int? {
        state.withLock { state in
            switch state.warnings.occurred(Self.kind, now: ContinuousClock.now - state.clock) {
            case .write(let heldBack, _): heldBack
            case .holdBack: nil
            }
        }
    }
}

import Synchronization
import Tracing

/// A span of `WorkerTracer`. A sampled span keeps what it is told under a lock and, when it ends, goes to the export
/// queue; an unsampled one only carries its identity (its children and log lines continue the trace) and keeps
/// nothing.
final class RecordedSpan: Span {
    let context: InstrumentationContext
    let identity: SpanIdentity
    let isRecording: Bool
    private let parentSpanID: UInt64?
    private let kind: SpanKind
    private let startNanoseconds: UInt64
    private let queue: FinishedSpanQueue
    private let state: Mutex<State>

    private struct State {
        var name: String
        var attributes = SpanAttributes()
        var status: SpanStatus?
        var events: [SpanEvent] = []
        var links: [SpanLink] = []
        var hasEnded = false
    }

    init(
        name: String, kind: SpanKind, identity: SpanIdentity, parentSpanID: UInt64?, context: InstrumentationContext,
        startNanoseconds: UInt64, queue: FinishedSpanQueue
    ) {
        self.identity = identity
        self.isRecording = identity.isSampled
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.context = context
        self.queue = queue
        self.state = Mutex(State(name: name))
    }

    var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set {
            guard isRecording else { return }
            state.withLock { $0.attributes = newValue }
        }
    }

    /// Applies `update` to the attributes in place, under the lock (the protocol's default copies them twice).
    func updateAttributes(_ update: (inout SpanAttributes) -> Void) {
        guard isRecording else { return }
        state.withLock { update(&$0.attributes) }
    }

    func setStatus(_ status: SpanStatus) {
        guard isRecording else { return }
        state.withLock { state in
            // The specification: OK is final, and UNSET never replaces a status.
            if state.status?.code == .ok { return }
            state.status = status
        }
    }

    func addEvent(_ event: SpanEvent) {
        guard isRecording else { return }
        state.withLock { $0.events.append(event) }
    }

    func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        guard isRecording else { return }
        // The exception event of the OpenTelemetry semantic conventions.
        var eventAttributes = attributes
        eventAttributes["exception.type"] = "\(type(of: error))"
        eventAttributes["exception.message"] = "\(error)"
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: eventAttributes))
    }

    func addLink(_ link: SpanLink) {
        guard isRecording else { return }
        state.withLock { $0.links.append(link) }
    }

    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        guard isRecording else { return }
        let endNanoseconds = instant().nanosecondsSinceEpoch
        let finished = state.withLock { state -> FinishedSpan? in
            guard !state.hasEnded else { return nil }  // a second end is ignored
            state.hasEnded = true
            return FinishedSpan(
                identity: identity, parentSpanID: parentSpanID, name: state.name, kind: kind,
                startNanoseconds: startNanoseconds, endNanoseconds: endNanoseconds, attributes: state.attributes,
                status: state.status, events: state.events, links: state.links)
        }
        if let finished { queue.append(finished) }
    }
}

import AMQPTransport
import Foundation
import WalletMessages

/// What one run of a `dead-letters` command does with each message of the dead-letter queue: pure decisions, one
/// per message in queue order, which `DeadLetterQueue.walk` carries out.
///
/// A run walks the queue once, from its head to a marker the run published to its tail when it started, and
/// moves every message it does not remove to the tail behind that marker: so it sees each message once, in
/// order, however many there are, holding only a window of them; what arrives meanwhile (after the marker) waits
/// for the next run; and after a whole run the queue holds what it held, in the same order. A message is
/// removed (acknowledged) only when it is purged or when its replay was confirmed.
public struct DeadLetterPass: Sendable {
    public enum Command: Sendable, Hashable {
        /// `list`, `show`, `replay --dry-run`: select, report, keep everything.
        case look
        /// `replay`: publish the selected ones to the inbound exchange (or, first sent straight to one of
        /// `ownQueues`, back to it); `force` replays truncated ones too.
        case replay(inboundExchange: String, ownQueues: Set<String>, force: Bool)
        /// `purge` with a filter: remove the selected ones.
        case purge
    }

    /// How a message goes back to the queue's tail.
    public enum Keeping: Sendable, Hashable {
        /// Rejected without requeue: the queue's dead-letter exchange is its loop, so the broker moves it to the
        /// tail whole (and records the look in its `x-death`). Needs nothing of the message: undecodable or
        /// unread ones go this way too.
        case throughLoop
        /// Published again to the tail through the loop exchange, with its routing key (confirmed), then
        /// acknowledged: every message of a quorum queue the tool can read and publish
        /// (RabbitMQ 3.10 moves a window of rejected messages through its loop in no particular order, and at
        /// most once), and on a classic queue a message whose `x-death` RabbitMQ 3.x cannot update (a publisher
        /// forged it), which would crash the queue if the broker dead-lettered it.
        case asCopy(AMQPOutboundMessage)
    }

    public enum Action: Sendable, Hashable {
        case keep(Keeping)
        /// Acknowledge: purged, or a marker of an earlier run that was interrupted.
        case remove
        /// Publish this replay; acknowledge once it is confirmed, keep it otherwise.
        case replay(AMQPOutboundMessage)
        /// This run's marker: everything the queue held when the run started has been seen. Acknowledge it, end.
        case end
    }

    public struct Decision: Sendable, Hashable {
        public var action: Action
        /// The message as the operator sees it; nil for a marker.
        public var letter: DeadLetter?
        /// It matched the filter.
        public var selected: Bool
        /// Selected, but the command will not act on it (a truncated dead letter without `--force`, a body the
        /// tool did not read): why.
        public var refusal: String?
    }

    public var command: Command
    public var filter: DeadLetterFilter
    /// Select at most this many (`--limit`), the first in queue order; the walk still goes to its marker, so the
    /// queue keeps its order. Nil: every one that matches.
    public var limit: Int?
    public var deadLetterQueue: String
    /// This run's marker (`markerHeader`); markers with another id are leftovers of interrupted runs.
    public var markerID: String
    public var now: Date
    /// Keep every message it can read by a confirmed copy rather than through the loop (`Keeping`): true for a
    /// quorum dead-letter queue, where only copies keep the queue's order and are never lost on the way.
    public var keepsByCopy: Bool
    /// The frame size of the connection that publishes copies (`DeadLetterQueue.walk` sets what the broker agreed
    /// to): a message whose content header the broker grew past it cannot be copied and goes through the loop.
    public var copyFrameMax = 131_072

    public init(
        command: Command, filter: DeadLetterFilter, deadLetterQueue: String, markerID: String, now: Date,
        keepsByCopy: Bool = false
    ) {
        self.command = command
        self.filter = filter
        self.deadLetterQueue = deadLetterQueue
        self.markerID = markerID
        self.now = now
        self.keepsByCopy = keepsByCopy
    }

    /// The header that marks the tail a run published when it started (its value: the run's id). A marker has an
    /// empty body and nothing else; a run that is interrupted leaves it behind, and the next run removes it.
    public static let markerHeader = "x-wallet-dead-letters-marker"

    /// The marker this run publishes to the dead-letter queue's tail (through the default exchange).
    public var marker: AMQPOutboundMessage {
        AMQPOutboundMessage(
            exchange: "", routingKey: deadLetterQueue, body: [],
            properties: AMQPMessageProperties(
                headers: [Self.markerHeader: .string(markerID)], deliveryMode: .persistent,
                type: "wallet-worker dead-letters marker"),
            mandatory: true)
    }

    /// - Parameter selectedBefore: how many this run selected before this message (for `limit`).
    public func decide(_ message: DeadLetterMessage, selectedBefore: Int = 0) -> Decision {
        if case .string(let id)? = message.properties.headers?[Self.markerHeader] {
            return Decision(action: id == markerID ? .end : .remove, letter: nil, selected: false, refusal: nil)
        }
        let letter = DeadLetter(message, deadLetterQueue: deadLetterQueue)
        let keep = Action.keep(keeping(message))
        guard limit.map({ selectedBefore < $0 }) ?? true, filter.matches(letter, at: now) else {
            return Decision(action: keep, letter: letter, selected: false, refusal: nil)
        }
        switch command {
        case .look:
            return Decision(action: keep, letter: letter, selected: true, refusal: nil)
        case .purge:
            return Decision(action: .remove, letter: letter, selected: true, refusal: nil)
        case .replay(let inboundExchange, let ownQueues, let force):
            switch DeadLetterReplay.message(
                for: message, inboundExchange: inboundExchange, ownQueues: ownQueues, force: force)
            {
            case .success(let replay):
                return Decision(action: .replay(replay), letter: letter, selected: true, refusal: nil)
            case .failure(let refusal):
                return Decision(action: keep, letter: letter, selected: true, refusal: refusal.description)
            }
        }
    }

    /// How this message goes back to the tail: as a copy on a quorum queue, or when RabbitMQ 3.x could not
    /// dead-letter it; through the loop otherwise, and always when the tool did not read its body.
    public func keeping(_ message: DeadLetterMessage) -> Keeping {
        let forged = !XDeathHeader.brokerCanUpdate(message.properties.headers)
        guard message.withheldBodySize == nil, keepsByCopy || forged else { return .throughLoop }
        // The copy keeps everything but a `user_id`, which RabbitMQ would refuse from this user (406): it moves to
        // `x-original-user-id`, as on the worker's own copies. `x-delivery-count` is the queue's count of this
        // message's returns; the copy is a message the queue has not delivered yet.
        var properties = message.properties
        var headers = properties.headers
        if headers?[Self.deliveryCountHeader] != nil {
            headers?[Self.deliveryCountHeader] = nil
            if headers?.isEmpty == true { headers = nil }
        }
        if let userID = properties.userID {
            headers = headers ?? [:]
            headers?[WorkerHeaders.originalUserID] =
                properties.undecodedStrings[.userID].map(AMQPFieldValue.bytes) ?? .string(userID)
            properties.userID = nil
            properties.undecodedStrings[.userID] = nil
        }
        properties.headers = headers
        // Through the loop exchange (a fanout bound to this queue alone), so the copy keeps its routing key.
        let copy = AMQPOutboundMessage(
            exchange: DeadLetterLoop.exchange(of: deadLetterQueue), routingKey: message.routingKey,
            body: message.body, properties: properties, mandatory: true)
        // A forged x-death is copied whatever its size: the loop would crash the queue, a copy that cannot be sent
        // stops the run before it.
        if !forged, copy.encodingProblem(frameMax: copyFrameMax) != nil { return .throughLoop }
        return .asCopy(copy)
    }

    /// The header a quorum queue adds to a message it delivers again.
    static let deliveryCountHeader = "x-delivery-count"

    /// What becomes of a replayed message once the broker answered (nil: no answer in time, or the publish
    /// failed): removed only when its replay was confirmed, kept as any other message otherwise.
    public func afterReplay(_ outcome: AMQPPublishOutcome?, of message: DeadLetterMessage) -> Action {
        outcome == .confirmed ? .remove : .keep(keeping(message))
    }
}

/// What a run did, for its closing line.
public struct DeadLetterRunSummary: Sendable, Hashable {
    /// Messages walked (markers not counted).
    public var seen = 0
    public var selected = 0
    /// Replays confirmed and their dead letters removed.
    public var replayed = 0
    /// Replays returned unroutable, nacked or unconfirmed: still dead letters.
    public var failed = 0
    /// Selected but not acted on (`DeadLetterPass.Decision.refusal`).
    public var refused = 0
    public var removed = 0
    /// Messages whose content header librabbitmq could not decode, even with the tool's larger frame limit: the
    /// broker moved them to the tail whole (through the loop), unseen.
    public var undecodable = 0
    /// Markers of interrupted runs that this run removed.
    public var staleMarkers = 0
    /// What the queue reported (ready messages) when the run started; a quorum queue may report fewer than it
    /// holds right after another consumer went away (its returns are still being applied).
    public var reportedAtStart = 0
    /// The run stopped early (a replay that was not confirmed in time, a broker failure, an interruption): what
    /// it had not reached stays where it was.
    public var stoppedEarly: String?
    /// The operator interrupted it (`WalkInterruption`): the command exits 130 after its closing line.
    public var interrupted = false

    public init() {}

    /// The closing line, on stderr.
    public func closingLine(queue: String, verb: String, count: Int) -> String {
        var line = "\(verb) \(count) of \(seen) dead letters in \(queue)"
        if failed > 0 { line += ", \(failed) failed (still dead letters)" }
        if refused > 0 { line += ", \(refused) selected but not acted on (see above)" }
        if undecodable > 0 {
            line +=
                "; \(undecodable) could not be shown: their content header cannot be decoded (a header table "
                + "larger than the tool's frame limit, or a field type librabbitmq does not know); they were kept, whole, in their place"
        }
        if staleMarkers > 0 { line += "; removed \(staleMarkers) marker(s) left by interrupted runs" }
        if reportedAtStart != seen + undecodable + staleMarkers && stoppedEarly == nil {
            line +=
                "; the queue reported \(reportedAtStart) when this run started (a quorum queue counts messages "
                + "another consumer just returned late; this run walked everything up to its marker)"
        }
        if let stoppedEarly { line += "; stopped early: \(stoppedEarly)" }
        return line
    }
}

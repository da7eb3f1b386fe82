import AMQPTransport
import Foundation
import Logging
import WalletMessages

/// The dead-letter queue for `wallet-worker dead-letters`: carries out a `DeadLetterPass` over it.
///
/// Two connections: one consumes (a window of `window` deliveries at a time, bodies up to `maximumBodyBytes`,
/// frames up to `frameLimit` so that a content header RabbitMQ sent larger than the negotiated frame size can be
/// read) and only settles; the other publishes (the run's marker, replays, copies) with confirms. Every message
/// is settled in queue order: acknowledged when removed (purged, or its replay confirmed), kept at the queue's tail
/// otherwise (`DeadLetterPass.Keeping`: rejected through its loop, or, on a quorum queue, copied there with
/// confirms before it is acknowledged). Whatever is unsettled when the run stops (interrupted, killed, the connection
/// lost) the broker returns to where it was. Nothing is lost, and nothing is held beyond the window: the run never
/// waits for more than the broker sends.
public final class DeadLetterQueue: Sendable {
    public let access: DeadLetterQueueAccess
    public var queue: String { access.queue }
    let logger: Logger
    /// Unacknowledged deliveries at a time (`basic.qos`).
    public let window: UInt16
    /// Bodies over this are not read (listed with their size, kept or purged, never replayed).
    public let maximumBodyBytes: Int
    /// The largest frame the consuming connection reads.
    public let frameLimit: Int
    /// Wait for one replay's confirm; then the run stops, leaving that message where it was.
    public let confirmTimeout: Duration
    /// Asked to stop (the operator's SIGINT): the run settles what it has begun (a replay confirmed is
    /// acknowledged, copies confirmed are acknowledged), leaves the rest where it was, and ends with its summary.
    public let interruption: WalkInterruption

    public init(
        access: DeadLetterQueueAccess, logger: Logger, window: UInt16 = 128, maximumBodyBytes: Int,
        frameLimit: Int = 4 << 20, confirmTimeout: Duration = .seconds(30),
        interruption: WalkInterruption = WalkInterruption()
    ) {
        self.interruption = interruption
        self.access = access
        self.logger = logger
        self.window = window
        self.maximumBodyBytes = maximumBodyBytes
        self.frameLimit = frameLimit
        self.confirmTimeout = confirmTimeout
    }

    public struct BusyQueue: Error, CustomStringConvertible {
        public var queue: String
        public var consumers: UInt32
        public var description: String {
            "\(queue) has \(consumers) consumer(s): they would take messages this command is walking. Stop them "
                + "first (rabbitmqctl list_consumers shows them)"
        }
    }

    /// The queue exists as an earlier version declared it: without its loop, a message rejected from it would
    /// be dropped, so the tool does not walk it.
    public struct NoLoop: Error, CustomStringConvertible {
        public var queue: String
        public var loop: String
        public var description: String {
            "\(queue) was declared by an earlier version, without its loop (x-dead-letter-exchange \(loop)): this "
                + "tool moves every message it looks at to the queue's tail through that loop, and without it a "
                + "message would be dropped. Re-declare the queue first: see docs/operations.md (Runbook: dead letters, "
                + "\"a dead-letter queue of an earlier version\")"
        }
    }

    struct MarkerNotPublished: Error, CustomStringConvertible {
        var outcome: AMQPPublishOutcome
        var description: String { "the run's marker could not be published to the dead-letter queue: \(outcome)" }
    }

    /// Connects, checks the queue is declared with its loop and unused, and runs `pass` over it. `report` is
    /// called for every message walked (in order, after it was settled, with what became of it); returning false
    /// stops the reports (the walk goes on: the reader went away).
    public func walk(
        _ pass: DeadLetterPass, report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Bool
    ) async throws -> DeadLetterRunSummary {
        var publishing = access.connection
        publishing.connectionName = "wallet-worker dead-letters (publishing)"
        let publisher = try await AMQPConnection.connect(configuration: publishing, logger: logger)
        do {
            let summary = try await walk(pass, publisher: publisher, report: report)
            await publisher.close()
            return summary
        } catch {
            await publisher.close()
            throw error
        }
    }

    /// What became of a walked message.
    public enum Outcome: Sendable, Hashable {
        case kept
        case removed
        case replayed
        /// Its replay was returned, nacked or not confirmed: kept.
        case replayFailed(String)
    }

    private func walk(
        _ pass: DeadLetterPass, publisher: AMQPConnection,
        report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Bool
    ) async throws -> DeadLetterRunSummary {
        var pass = pass
        pass.copyFrameMax = publisher.frameMax
        guard try await access.declare(publisher) else {
            throw NoLoop(queue: queue, loop: DeadLetterLoop.exchange(of: queue))
        }
        let channel = try await publisher.openChannel()
        try await channel.enableConfirms()
        let status = try await channel.queueStatus(queue)
        guard status.consumerCount == 0 else { throw BusyQueue(queue: queue, consumers: status.consumerCount) }
        var summary = DeadLetterRunSummary()
        summary.reportedAtStart = Int(status.messageCount)
        guard !interruption.isRequested else {
            summary.stoppedEarly = WalkInterruption.reason
            summary.interrupted = true
            try? await channel.close()
            return summary
        }
        let markerOutcome = try await channel.publish(pass.marker, confirmTimeout: confirmTimeout)
        guard markerOutcome == .confirmed else { throw MarkerNotPublished(outcome: markerOutcome) }

        let reporting = ReportGate(report)
        // Replays confirmed whose dead letter could not be acknowledged (the consuming connection ended first):
        // met again after a reconnect, they are removed without a second replay.
        var replayedUnsettled = Set<AMQPOutboundMessage>()
        var reconnects = 0
        while true {
            do {
                let ended = try await consumeOnce(
                    pass, publishChannel: channel, summary: &summary, replayedUnsettled: &replayedUnsettled
                ) { decision, message, outcome in reporting.report(decision, message, outcome) }
                if ended { break }
                // The consumer ended without the marker: the queue was emptied or deleted under the run.
                summary.stoppedEarly = "the run's marker never came back (was the queue purged or deleted meanwhile?)"
                break
            } catch let error as AMQPError where error.undecodableDelivery != nil {
                // Rejected to the loop by the transport before the connection ended: kept whole, at the tail.
                summary.undecodable += 1
                reconnects += 1
                logger.warning(
                    "a dead letter's content header could not be decoded: kept in its place, unseen",
                    metadata: [
                        "routing_key": "\(error.undecodableDelivery?.routingKey ?? "")", "error": "\(error)",
                    ])
                guard reconnects <= 10_000 else { throw error }
            } catch let stop as StopWalk {
                summary.stoppedEarly = stop.reason
                summary.interrupted = stop.interrupted
                break
            }
        }
        try? await channel.close()
        return summary
    }

    /// Passes reports on until the reader says it has gone.
    private final class ReportGate {
        var open = true
        let report: (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Bool
        init(_ report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Bool) { self.report = report }
        func report(_ decision: DeadLetterPass.Decision, _ message: DeadLetterMessage, _ outcome: Outcome) {
            if open { open = report(decision, message, outcome) }
        }
    }

    struct StopWalk: Error {
        var reason: String
        var interrupted = false
    }

    /// One consuming connection's share of the walk: true once the run's marker came back.
    private func consumeOnce(
        _ pass: DeadLetterPass, publishChannel: AMQPChannel, summary: inout DeadLetterRunSummary,
        replayedUnsettled: inout Set<AMQPOutboundMessage>,
        report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Void
    ) async throws -> Bool {
        var consuming = access.connection
        consuming.connectionName = "wallet-worker dead-letters (consuming)"
        let connection = try await AMQPConnection.connect(configuration: consuming, logger: logger)
        do {
            try await connection.readFrames(upTo: frameLimit)
            let channel = try await connection.openChannel()
            try await channel.setPrefetch(count: window)
            // Exclusive: a second run (or any consumer) is refused while this one walks.
            let consumer = try await channel.consume(
                queue: queue, exclusive: true, maximumBodyBytes: maximumBodyBytes,
                undecodableContent: .rejectToDeadLetterExchange)
            for try await batch in consumer {
                if try await settle(
                    batch, pass: pass, channel: channel, publishChannel: publishChannel, summary: &summary,
                    replayedUnsettled: &replayedUnsettled, report: report)
                {
                    // What came after the marker (messages this run moved, now the queue's head) goes back when the
                    // channel closes, in the order it was delivered. No `basic.cancel` first (which the connection's
                    // close, or dropping the consumer, would send): a quorum queue (RabbitMQ 3.10) gives back what
                    // is in flight after a cancel at once, ahead of what the channel's close returns (measured: a
                    // look rotated the first 128 of 3,000 by the last few delivered).
                    try? await channel.close()
                    await connection.close()
                    withExtendedLifetime(consumer) {}
                    return true
                }
            }
            await connection.close()
            return false
        } catch {
            await connection.close()
            throw error
        }
    }

    /// Copies published to the tail before their originals are acknowledged, at most this many at a time: a run
    /// killed between a group's confirms and its acknowledgement leaves at most this many dead letters twice.
    static let copiesInFlight = 32

    /// A delivery kept by a copy that is not published yet.
    private struct PendingCopy {
        var tag: UInt64
        var copy: AMQPOutboundMessage
        var decision: DeadLetterPass.Decision
        var message: DeadLetterMessage
        var outcome: Outcome
    }

    /// Decides and settles a batch in order; true when it held the run's marker.
    private func settle(
        _ batch: [AMQPDelivery], pass: DeadLetterPass, channel: AMQPChannel, publishChannel: AMQPChannel,
        summary: inout DeadLetterRunSummary, replayedUnsettled: inout Set<AMQPOutboundMessage>,
        report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, Outcome) -> Void
    ) async throws -> Bool {
        // In order: `--limit` counts what this run selected before (settled, and earlier in this batch).
        var selectedBefore = summary.selected
        let decisions = batch.map { delivery in
            let decision = pass.decide(DeadLetterMessage(delivery), selectedBefore: selectedBefore)
            if decision.selected { selectedBefore += 1 }
            return decision
        }
        // Settlements go out in runs (one `basic.ack`/`basic.nack` with `multiple` per run); what a run settled is
        // reported and counted only once it went out, so a connection that ends first reports nothing twice.
        var run: (ack: Bool, tag: UInt64)?
        var unreported: [(DeadLetterPass.Decision, DeadLetterMessage, Outcome)] = []
        var copies: [PendingCopy] = []
        var stop: StopWalk?
        func flush() async throws {
            if let pending = run {
                run = nil
                if pending.ack {
                    try await channel.ack(deliveryTag: pending.tag, multiple: true)
                } else {
                    try await channel.nack(deliveryTag: pending.tag, multiple: true, requeue: false)
                }
            }
            for (decision, message, outcome) in unreported {
                count(decision, outcome, into: &summary)
                if decision.letter != nil { report(decision, message, outcome) }
            }
            unreported.removeAll()
        }
        func enqueue(_ ack: Bool, _ tag: UInt64) async throws {
            if let current = run, current.ack != ack { try await flush() }
            run = (ack, tag)
        }
        // Publishes the pending copies to the tail, after everything settled before them, and acknowledges each
        // original once its own copy is confirmed. Whatever is not confirmed stays in place, and the run stops.
        func flushCopies() async throws {
            guard !copies.isEmpty else { return }
            let group = copies
            copies.removeAll()
            try await flush()
            let outcomes: [AMQPPublishOutcome]
            do {
                outcomes = try await publishChannel.publish(group.map(\.copy), confirmTimeout: confirmTimeout)
            } catch {
                // Some may be at the tail already: their originals stay too (twice at worst, never lost).
                stop =
                    stop ?? StopWalk(reason: "dead letters could not be copied to the tail (\(error)): kept in place")
                return
            }
            guard let failed = outcomes.firstIndex(where: { $0 != .confirmed }) else {
                try await enqueue(true, group[group.count - 1].tag)
                unreported += group.map { ($0.decision, $0.message, $0.outcome) }
                return
            }
            for (pending, outcome) in zip(group, outcomes) where outcome == .confirmed {
                try await channel.ack(deliveryTag: pending.tag)
                unreported.append((pending.decision, pending.message, pending.outcome))
            }
            try await flush()
            stop =
                stop
                ?? StopWalk(
                    reason: "a dead letter could not be copied to the tail (\(outcomes[failed])): kept in place")
        }
        func keep(_ keeping: DeadLetterPass.Keeping, _ index: Int, _ outcome: Outcome) async throws {
            let delivery = batch[index]
            switch keeping {
            case .throughLoop:
                // A rejection with `multiple` would also take the deliveries whose copies are pending.
                try await flushCopies()
                guard stop == nil else { return }
                try await enqueue(false, delivery.deliveryTag)
                unreported.append((decisions[index], DeadLetterMessage(delivery), outcome))
            case .asCopy(let copy):
                copies.append(
                    PendingCopy(
                        tag: delivery.deliveryTag, copy: copy, decision: decisions[index],
                        message: DeadLetterMessage(delivery), outcome: outcome))
                if copies.count >= Self.copiesInFlight { try await flushCopies() }
            }
        }
        for index in batch.indices where stop == nil {
            // After a stop the rest is left unsettled: returned to its place when the connection closes. An
            // interruption stops here, between two messages: what came before is settled (its copies below).
            if interruption.isRequested {
                stop = StopWalk(reason: WalkInterruption.reason, interrupted: true)
                break
            }
            let delivery = batch[index]
            let decision = decisions[index]
            if case .keep(let keeping) = decision.action {
                try await keep(keeping, index, .kept)
                continue
            }
            // Copies go to the tail before anything after them is settled: the tail keeps the queue's order.
            try await flushCopies()
            if stop != nil { break }
            switch decision.action {
            case .keep:
                preconditionFailure("kept above")
            case .end:
                try await enqueue(true, delivery.deliveryTag)
                try await flush()
                return true
            case .remove:
                try await enqueue(true, delivery.deliveryTag)
                unreported.append((decision, DeadLetterMessage(delivery), .removed))
            case .replay(let replay):
                // One replay in flight at a time, its dead letter acknowledged as soon as its own confirm came:
                // a run interrupted anywhere leaves at most this one replayed and still a dead letter.
                try await flush()
                var outcome: AMQPPublishOutcome?
                var failure: String?
                if replayedUnsettled.contains(replay) {
                    outcome = .confirmed  // its replay was confirmed before the last consuming connection ended
                } else {
                    do {
                        outcome = try await publishChannel.publish(replay, confirmTimeout: confirmTimeout)
                    } catch {
                        failure = "\(error)"
                    }
                }
                switch pass.afterReplay(outcome, of: DeadLetterMessage(delivery)) {
                case .keep(let keeping):
                    let why = failure ?? outcome.map { "\($0)" } ?? "no answer"
                    try await keep(keeping, index, .replayFailed(why))
                    if failure != nil {
                        // No answer in time, or the publishing connection failed: stop here (the broker is in
                        // trouble); this one may have been routed, and the next run may replay it again.
                        stop = StopWalk(reason: "a replay was not confirmed: \(why)")
                    }
                default:
                    // Acknowledged at once: the replay is out, its dead letter must go before anything can stop.
                    replayedUnsettled.insert(replay)
                    try await enqueue(true, delivery.deliveryTag)
                    unreported.append((decision, DeadLetterMessage(delivery), .replayed))
                    try await flush()
                    replayedUnsettled.remove(replay)
                }
            }
        }
        try await flushCopies()
        try await flush()
        if let stop { throw stop }
        return false
    }

    private func count(
        _ decision: DeadLetterPass.Decision, _ outcome: Outcome, into summary: inout DeadLetterRunSummary
    ) {
        guard decision.letter != nil else {
            summary.staleMarkers += 1
            return
        }
        summary.seen += 1
        if decision.selected { summary.selected += 1 }
        if decision.refusal != nil { summary.refused += 1 }
        switch outcome {
        case .kept: break
        case .removed: summary.removed += 1
        case .replayed: summary.replayed += 1
        case .replayFailed: summary.failed += 1
        }
    }

    /// Removes every message (`queue.purge`); returns how many.
    public func purgeAll() async throws -> UInt32 {
        var settings = access.connection
        settings.connectionName = "wallet-worker dead-letters (purge)"
        let connection = try await AMQPConnection.connect(configuration: settings, logger: logger)
        do {
            let channel = try await connection.openChannel()
            let purged = try await channel.purgeQueue(queue)
            await connection.close()
            return purged
        } catch {
            await connection.close()
            throw error
        }
    }
}

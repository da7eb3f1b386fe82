import Foundation
import Logging
import Synchronization
import WalletRouting

/// What the lifecycle's reports (`LifecycleEvent`) become: metrics, log lines, readiness, and the end of each
/// message's span. It decides nothing.
struct LifecycleObserver: Sendable {
    var metrics: WorkerMetrics
    var health: WorkerHealth
    var logger: Logger
    /// The messages' spans; nil when tracing is off (the default).
    var tracing: MessageTracing?
    /// The pipeline's deliveries received and not yet ended (`wallet_in_flight_deliveries`): every delivery has
    /// exactly one end (`DeliveryLifecycle`), so this is received minus ended.
    let inFlight = InFlightCount()
    /// Deliveries taken and given back, for the worker's last line.
    let stopTally: StopTally
    /// The warnings a storm repeats, written once and then summarised (shared by every pipeline's observer).
    let storms: WarningStorms

    init(
        metrics: WorkerMetrics, health: WorkerHealth, logger: Logger, tracing: MessageTracing?, stopTally: StopTally,
        storms: WarningStorms
    ) {
        self.metrics = metrics
        self.stopTally = stopTally
        self.storms = storms
        self.health = health
        self.logger = logger
        self.tracing = tracing
    }

    func observe(_ event: LifecycleEvent) {
        switch event {
        case .consuming(let session, let queue):
            health.pipelineStartedConsuming()
            metrics.consumingPipelines.increment()
            logger.info("consuming", metadata: ["queue": "\(queue)", "session": "\(session)"])
        case .sessionEnded(_, _, let wasConsuming):
            if wasConsuming {
                health.pipelineStoppedConsuming()
                metrics.consumingPipelines.decrement()
            }
        case .sessionFailed(let session, let error):
            logger.error("broker session failed", metadata: ["error": "\(error)", "session": "\(session)"])
        case .reconnecting(let pipeline, let attempt, let delay):
            metrics.reconnects.increment()
            logger.info(
                "reconnecting",
                metadata: [
                    "pipeline": "\(pipeline)", "in": "\(DurationText.format(delay))", "attempt": "\(attempt)",
                ])
        case .received(let session, let deliveries):
            inFlight.add(deliveries.count)
            stopTally.received(deliveries.count)
            tracing?.started(session, deliveries)
        case .ended(let ends):
            inFlight.add(-ends.count)
            // One clock read for the batch: this runs for every message.
            let now = Date()
            var processed = false
            for end in ends { processed = ended(end, now: now) || processed }
            if processed { metrics.recordProcessed(at: now) }
        case .publishNotConfirmed(let session, let delivery, let reason):
            storms.log(
                .publishNotConfirmed, "publish not confirmed",
                metadata: metadata(delivery, session, ["error": "\(reason)"]), to: logger)
        case .resultNotTaken(let session, let delivery, let reason):
            storms.log(
                .resultNotTaken, level: .error, "dead-lettered, but its rejected result was not taken",
                metadata: metadata(delivery, session, ["error": "\(reason)"]), to: logger)
        case .replyCopiesReturned(let count):
            metrics.unroutableReplyCopies.increment(by: Int64(count))
        case .storingOneAtATime(_, let messages, let error):
            logger.warning(
                "the store refused the batch; storing its messages one at a time",
                metadata: ["error": "\(error)", "batch": "\(messages)"])
        case .batchFailsWhileStoreAnswers(_, let messages, let error):
            logger.warning(
                "the store answers but this batch keeps failing: it goes to the retry queue",
                metadata: ["error": "\(error)", "batch": "\(messages)"])
        case .storeOutageBegan(let error):
            health.storeAvailability(false)
            metrics.storeAvailable.set(0.0)
            metrics.paused[.store]?.set(1.0)
            metrics.storeOutages.increment()
            logger.error(
                "the store does not answer: holding the batch in hand and taking no more until it does",
                metadata: ["error": "\(error)"])
        case .storeOutageEnded(let after):
            health.storeAvailability(true)
            metrics.storeAvailable.set(1.0)
            metrics.paused[.store]?.set(0.0)
            logger.notice("the store answers again: consuming", metadata: ["outage": "\(DurationText.format(after))"])
        case .givingBack(let session, let deliveries, let heldFor, let cause):
            logger.warning(
                cause == .store
                    ? """
                    the store has been out for long: giving the held deliveries back to the queue before the \
                    broker's consumer timeout, and pausing until it answers
                    """
                    : """
                    the results have been refused for long: giving the deliveries held through the pause back to \
                    the queue before the broker's consumer timeout
                    """,
                metadata: [
                    "deliveries": "\(deliveries)", "held": "\(DurationText.format(heldFor))", "session": "\(session)",
                ])
        case .paused(let cause, let reason, let failedTrial, let nextTrial):
            health.paused(cause, true)
            metrics.paused[cause]?.set(1.0)
            var metadata: Logger.Metadata = [
                "cause": "\(cause.rawValue)", "reason": "\(reason)",
                "next_trial_in": "\(DurationText.format(nextTrial))",
            ]
            if let failedTrial {
                metadata["trial"] = "\(failedTrial)"
                logger.warning("the trial found the results still refused: paused again", metadata: metadata)
            } else {
                metrics.resultsPauses.increment()
                logger.error(
                    """
                    every message's results are refused: paused, taking no more until a trial finds them taken \
                    (nothing is dead-lettered for it)
                    """, metadata: metadata)
            }
        case .trialBegan(let cause, let attempt, let held):
            if held > 0 {
                logger.notice(
                    "trying the results again: publishing the results of the deliveries held through the pause",
                    metadata: ["cause": "\(cause.rawValue)", "trial": "\(attempt)", "held": "\(held)"])
            } else {
                logger.notice(
                    "trying the results again: consuming",
                    metadata: ["cause": "\(cause.rawValue)", "trial": "\(attempt)"])
            }
        case .resumed(let cause, let after, let gaveBack):
            health.paused(cause, false)
            metrics.paused[cause]?.set(0.0)
            logger.notice(
                "the results are taken again: resumed",
                metadata: [
                    "cause": "\(cause.rawValue)", "paused_for": "\(DurationText.format(after))",
                    "gave_back": "\(gaveBack)",
                ])
        case .requeueDelayed(_, let deliveries, let delay):
            metrics.delayedRequeues.increment(by: Int64(deliveries))
            storms.log(
                .requeueDelayed, "retry and dead-letter publishes failed; requeueing after a delay",
                metadata: ["deliveries": "\(deliveries)", "delay": "\(DurationText.format(delay))"], to: logger)
        }
    }

    /// Metrics and a log line for a delivery that has left the work queue (or was given back to it); true when the
    /// store processed it.
    private func ended(_ end: DeliveryEnd, now: Date) -> Bool {
        // After the log line, which carries the span's ids.
        defer { tracing?.finished(end) }
        let delivery = end.delivery
        let fate = end.fate
        guard fate.leavesTheQueue else {
            stopTally.gaveBack(1)
            // Given back: it is processed when it comes again. Counted as a requeue where the lifecycle decided it.
            let level = Self.level(of: fate.severity(isDomainError: false))
            log(
                fate, level: level,
                metadata: metadata(delivery, end.session, fate.logMetadata.mapValues { .string($0) }))
            return false
        }
        metrics.processingTime.record(end.elapsed)
        if end.skippedReplyCopies > 0 {
            metrics.skippedReplyCopies.increment(by: Int64(end.skippedReplyCopies))
            storms.log(
                .malformedReplyTo,
                "reply_to is malformed (not UTF-8, or a direct reply-to address RabbitMQ cannot decode); its copies were not published",
                metadata: metadata(
                    delivery, end.session, ["reply_to": "\(delivery.original.properties.replyTo ?? "")"]),
                to: logger)
        }
        if delivery.redelivered { metrics.redeliveries.increment() }
        if let timestamp = delivery.original.properties.timestamp {
            let lag = now.timeIntervalSince1970 - Double(timestamp)
            if lag >= 0 { metrics.processingLag.record(.milliseconds(Int64(lag * 1000))) }
        } else {
            metrics.withoutTimestamp.increment()
        }
        if let stored = end.stored {
            let decision = stored.decision
            metrics.countMessage(
                sender: decision.sender, isInstallation: delivery.original.isDeviceInstallation,
                outcome: decision.outcome)
            if stored.isReplay { metrics.replays.increment() }
            if delivery.original.properties.messageID?.isEmpty ?? true { metrics.withoutMessageID.increment() }
        }
        let level = Self.level(of: fate.severity(isDomainError: end.stored?.decision.outcome == .domainError))
        log(fate, level: level, metadata: metadata(of: end))
        // Counted after the line: whoever sees a retry or dead letter counted sees its line written, or its place
        // in a storm taken (a test of the storms turns its clock once the count is complete).
        if case .retried = fate { metrics.retries.increment() }
        if let reason = fate.deadLetterReason { metrics.countDeadLetter(reason: reason) }
        return end.stored != nil
    }

    /// A delivery's line: below warning as it is (debug lines for every processed message are asked for); at warning
    /// and above through the storms, so that a flood of rejected or retried messages stays readable. `metadata` is
    /// built only when the line is written: this runs for every message.
    private func log(_ fate: DeliveryFate, level: Logger.Level, metadata: @autoclosure () -> Logger.Metadata) {
        guard logger.logLevel <= level else { return }
        if level >= .warning {
            storms.log(.fate(fate), level: level, fate.logMessage, metadata: metadata(), to: logger)
        } else {
            logger.log(level: level, "\(fate.logMessage)", metadata: metadata())
        }
    }

    /// What a finished delivery's line says beyond its message.
    private func metadata(of end: DeliveryEnd) -> Logger.Metadata {
        var extra: Logger.Metadata = end.fate.logMetadata.mapValues { .string($0) }
        if let wait = end.retryWait {
            extra["retry_queue"] = "\(wait.queue)"
            extra["expiration_ms"] = "\(wait.milliseconds)"
        }
        if let decision = end.stored?.decision {
            extra["outcome"] = "\(decision.outcome.rawValue)"
            if let sender = decision.sender { extra["sender"] = "\(sender)" }
            if let card = decision.digitalCardId { extra["digitalCardId"] = "\(card)" }
            if end.stored?.isReplay == true { extra["replay"] = "true" }
        }
        return metadata(end.delivery, end.session, extra)
    }

    /// The log level a fate's severity is said at.
    static func level(of severity: DeliveryFate.Severity) -> Logger.Level {
        switch severity {
        case .routine: .debug
        case .notable: .info
        case .attention: .warning
        case .failure: .error
        }
    }

    /// A delivery's log metadata; with its message span when tracing is on.
    private func metadata(
        _ delivery: DeliveryLifecycle.Delivery, _ session: DeliveryLifecycle.SessionID, _ extra: Logger.Metadata
    ) -> Logger.Metadata {
        var metadata = extra
        metadata["message_id"] = "\(delivery.original.properties.messageID ?? "")"
        metadata["delivery_tag"] = "\(delivery.tag)"
        if let tracing {
            metadata.merge(tracing.logMetadata(of: delivery, session: session)) { current, _ in current }
        }
        return metadata
    }
}

extension OriginalMessage {
    var isDeviceInstallation: Bool {
        properties.type == NotificationRouter.deviceInstallationType
            || properties.type == NotificationRouter.deviceInstallationDeletedType
    }
}

/// A count shared by a pipeline's observers and read by the in-flight gauge at each scrape.
final class InFlightCount: Sendable {
    private let value = Mutex(0)

    func add(_ delta: Int) {
        value.withLock { $0 += delta }
    }

    var current: Int { value.withLock { $0 } }
}

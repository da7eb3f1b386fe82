import AMQPTransport
import Foundation
import Logging
import Tracing
import WalletRouting
import WalletStore

/// Processes one batch of deliveries: one store transaction, one confirmed publish of every result, then the
/// acknowledgements (CONTRACT.md §8, §10). Nothing is acknowledged before what it published is confirmed.
///
/// A failure of the publish channel or the consume connection is thrown: the pipeline reconnects and the broker
/// redelivers what was not acknowledged; the store replays the recorded results, so nothing is applied twice.
struct BatchProcessor: Sendable {
    var store: any WalletStore
    var router: NotificationRouter
    var topology: Topology
    /// The waits between a message's attempts, and how many it gets.
    var retry: RetrySchedule
    var confirmTimeout: Duration
    var metrics: WorkerMetrics
    var logger: Logger
    /// Shared by every pipeline of the process: messages that failed their sessions (see `PoisonGuard`).
    var poisonGuard = PoisonGuard()
    /// Grows while second publishes keep failing, so a refusing broker is not asked again at full speed.
    var requeueBackoff = RequeueBackoff()
    /// Pauses the pipelines while the store does not answer; nil: retry through the queue at once (tests).
    var storeCircuit: StoreCircuit?
    /// Ends the wait for the store on SIGTERM.
    var stop = StopSignal()
    /// The messages' spans; nil when tracing is off (the default), and then no span is ever made.
    var tracing: MessageTracing?

    /// A store failure that retrying cannot fix and no single message explains (a corrupt or newer database): the
    /// worker stops without acknowledging, so the messages stay in the queue for a fixed deployment.
    struct FatalStoreError: Error, CustomStringConvertible {
        var underlying: StoreError
        var description: String { "\(underlying)" }
    }

    /// A batch whose store transaction is committed and whose results are on their way to the broker.
    struct PublishedBatch: Sendable {
        var deliveries: [AMQPDelivery]
        fileprivate var plans: [DeliveryPlan]
        fileprivate var confirms: AMQPPendingConfirms?
        fileprivate var started: ContinuousClock.Instant
        /// One per delivery when tracing is on, else empty.
        fileprivate var messageSpans: [any Span] = []
        /// One per message of `plans`, in publication order, when tracing is on, else empty.
        fileprivate var publishSpans: [any Span] = []
        /// Their registration in `MessageTracing.open`.
        fileprivate var openSpansToken: Int?
    }

    /// The whole batch, then the next: store, publish, wait for the confirms, acknowledge.
    func process(
        _ deliveries: [AMQPDelivery], consumeChannel: AMQPChannel, publishChannel: AMQPChannel,
        replies: DirectReplyPublisher
    ) async throws {
        guard !deliveries.isEmpty else { return }
        let published = try await storeAndPublish(deliveries, on: publishChannel, replies: replies)
        try await acknowledge(published, consumeChannel: consumeChannel, publishChannel: publishChannel)
    }

    /// The first stage: the batch's store transaction, then its results sent without waiting for the confirms.
    /// Batches leave here in order, and their results go out in that order.
    func storeAndPublish(
        _ deliveries: [AMQPDelivery], on publishChannel: AMQPChannel, replies: DirectReplyPublisher
    ) async throws -> PublishedBatch {
        let started = ContinuousClock.now
        metrics.batchSize.record(Double(deliveries.count))
        guard let tracing else {
            let plans = try await plan(deliveries)
            let confirms = startPublishing(plans, on: publishChannel)
            if plans.contains(where: { !$0.directReplies.isEmpty }) {
                await replies.send(plans.flatMap(\.directReplies))
            }
            return PublishedBatch(deliveries: deliveries, plans: plans, confirms: confirms, started: started)
        }
        let messageSpans = tracing.startMessageSpans(deliveries)
        do {
            let storeSpans = tracing.startStoreSpans(parents: messageSpans)
            let plans: [DeliveryPlan]
            do {
                plans = try await plan(deliveries)
            } catch {
                MessageTracing.fail(storeSpans, error)
                throw error
            }
            storeSpans.forEach { $0.end() }
            let publishSpans = tracing.startPublishSpans(plans, parents: messageSpans)
            let confirms = startPublishing(plans, on: publishChannel)
            if plans.contains(where: { !$0.directReplies.isEmpty }) {
                await replies.send(plans.flatMap(\.directReplies))
            }
            return PublishedBatch(
                deliveries: deliveries, plans: plans, confirms: confirms, started: started,
                messageSpans: messageSpans, publishSpans: publishSpans,
                openSpansToken: tracing.open.insert(messageSpans + publishSpans))
        } catch {
            MessageTracing.fail(messageSpans, error)
            throw error
        }
    }

    /// The second stage: waits for the batch's confirms, sends what was not taken to the retry queue, then
    /// acknowledges. Batches must come here in the order they were published: the acknowledgement covers every
    /// earlier delivery (`multiple`).
    func acknowledge(_ batch: PublishedBatch, consumeChannel: AMQPChannel, publishChannel: AMQPChannel) async throws {
        guard let token = batch.openSpansToken else {
            return try await settle(batch, consumeChannel: consumeChannel, publishChannel: publishChannel)
        }
        tracing?.open.remove(token)
        do {
            try await settle(batch, consumeChannel: consumeChannel, publishChannel: publishChannel)
        } catch {
            MessageTracing.fail(batch.messageSpans, error)
            throw error
        }
    }

    private func settle(_ batch: PublishedBatch, consumeChannel: AMQPChannel, publishChannel: AMQPChannel) async throws {
        let deliveries = batch.deliveries
        guard let last = deliveries.last else { return }
        var plans = batch.plans
        let spans = batch.messageSpans
        let failures = try await failures(of: plans, confirms: batch.confirms, publishSpans: batch.publishSpans)

        // Deliveries whose messages were not all taken go to the retry queue (or, on their last attempt, the
        // dead-letter exchange) in a second confirmed publish; any still not taken are requeued.
        var requeue = Set<Int>()
        if !failures.isEmpty {
            var second: [(index: Int, plan: DeliveryPlan)] = []
            for (index, failure) in failures {
                logger.warning("publish not confirmed",
                               metadata: deliveries[index].logMetadata(["error": "\(failure.reason)"], span: spans[safe: index]))
                let original = plans[index].original
                second.append((index, failure.isPermanent
                    ? DeliveryPlan(original: original, unpublishable: failure.reason, topology: topology)
                    : DeliveryPlan(
                        original: original, transientFailure: failure.reason, retry: retry, jitter: .random(in: 0..<1),
                        topology: topology)))
            }
            let secondPlans = second.map(\.plan)
            let secondSpans = tracing?.startPublishSpans(secondPlans, parents: second.map { spans[$0.index] }) ?? []
            let secondFailures = try await self.failures(
                of: secondPlans, confirms: startPublishing(secondPlans, on: publishChannel), publishSpans: secondSpans)
            for (position, entry) in second.enumerated() {
                if secondFailures[position] != nil {
                    requeue.insert(entry.index)
                } else {
                    plans[entry.index] = entry.plan
                }
            }
        }

        if !requeue.isEmpty {
            // The retry queue or the dead-letter exchange is refusing too: requeued at once, the delivery would
            // come straight back and fail again at full speed.
            metrics.delayedRequeues.increment(by: Int64(requeue.count))
            let delay = requeueBackoff.next()
            logger.warning("retry and dead-letter publishes failed; requeueing after a delay",
                           metadata: ["deliveries": "\(requeue.count)", "delay": "\(DurationText.format(delay))"])
            try await Task.sleep(for: delay)
        } else {
            requeueBackoff.reset()
        }
        try await acknowledge(deliveries, plans: plans, requeue: requeue, last: last, on: consumeChannel)
        metrics.recordAcknowledged(plans, requeued: requeue)
        poisonGuard.recordSettled(deliveries)
        let elapsed = ContinuousClock.now - batch.started
        for (index, plan) in plans.enumerated() where !requeue.contains(index) {
            record(plan, of: deliveries[index], elapsed: elapsed, span: spans[safe: index])
        }
        for (index, span) in spans.enumerated() {
            MessageTracing.finish(span, plan: plans[index], requeued: requeue.contains(index))
        }
    }

    /// The batch through the store, as one plan per delivery.
    private func plan(_ deliveries: [AMQPDelivery]) async throws -> [DeliveryPlan] {
        let planner = BatchPlanner(
            store: store, router: router, topology: topology, retry: retry, logger: logger)
        let originals = deliveries.map(OriginalMessage.init)
        // Deliveries that failed their sessions too often are dead-lettered, not processed again.
        let condemned = poisonGuard.isEmpty ? [] : deliveries.map(poisonGuard.condemned)
        guard condemned.contains(where: { $0 != nil }) else { return try await planHeld(originals, planner) }
        let processed = originals.indices.filter { condemned[$0] == nil }
        var plans = try await planHeld(processed.map { originals[$0] }, planner)[...]
        return originals.indices.map { index in
            guard let record = condemned[index] else { return plans.popFirst()! }
            return DeliveryPlan(
                original: originals[index], poison: record.error, failures: record.failures, topology: topology)
        }
    }

    /// The batch through the store, held while the store does not answer (`StoreCircuit`): tried again after a
    /// growing delay with jitter, not acknowledged, taking no more meanwhile. When the store answers its check but
    /// the batch fails `attemptsWhileStoreAnswers` times, the failure is the batch's: it goes to the retry queue.
    /// Stopping (SIGTERM) ends the wait with `CancellationError`: the broker redelivers the batch.
    func planHeld(_ originals: [OriginalMessage], _ planner: BatchPlanner) async throws -> [DeliveryPlan] {
        guard !originals.isEmpty else { return [] }
        var generator = SystemRandomNumberGenerator()
        var attempt = 0
        var attemptsWhileAnswering = 0
        while true {
            let began = ContinuousClock.now
            do {
                let plans = try await planner.plan(originals, now: Date())
                metrics.recordStoreBatch(ContinuousClock.now - began, committed: true)
                storeCircuit?.storeAnswered()
                return plans
            } catch let failure as BatchPlanner.TransientStoreFailure {
                metrics.recordStoreBatch(ContinuousClock.now - began, committed: false)
                guard let storeCircuit else {
                    return planner.retryPlans(originals[...], error: failure.error)
                }
                attempt += 1
                if await storeAnswers() {
                    attemptsWhileAnswering += 1
                    if attemptsWhileAnswering >= StoreCircuit.attemptsWhileStoreAnswers {
                        logger.warning("the store answers but this batch keeps failing: it goes to the retry queue",
                                       metadata: ["error": "\(failure.error)", "batch": "\(originals.count)"])
                        storeCircuit.storeAnswered()
                        return planner.retryPlans(originals[...], error: failure.error)
                    }
                } else {
                    storeCircuit.storeFailed(failure.error)
                }
                await stop.sleep(for: storeCircuit.delay(attempt: attempt, using: &generator))
                if stop.isStopped || Task.isCancelled { throw CancellationError() }
            }
        }
    }

    private func storeAnswers() async -> Bool {
        do {
            try await store.checkAvailable()
            return true
        } catch {
            return false
        }
    }

    /// Sends every plan's messages as one confirmed batch; nil when there is nothing to send.
    private func startPublishing(_ plans: [DeliveryPlan], on channel: AMQPChannel) -> AMQPPendingConfirms? {
        let messages = plans.flatMap(\.messages)
        guard !messages.isEmpty else { return nil }
        return channel.startPublishing(messages, confirmTimeout: confirmTimeout)
    }

    /// Why a plan's messages were not all taken; permanent when one could not be encoded (no retry helps).
    private struct PublishFailure {
        var reason: String
        var isPermanent = false
    }

    /// Waits for the confirms of the plans' messages; returns, by plan index, why a plan failed.
    /// A confirm timeout fails every plan (the channel stays usable); a channel or connection error is thrown.
    private func failures(
        of plans: [DeliveryPlan], confirms: AMQPPendingConfirms?, publishSpans: [any Span] = []
    ) async throws -> [Int: PublishFailure] {
        guard let confirms else { return [:] }
        let outcomes: [AMQPPublishOutcome]
        let began = ContinuousClock.now
        defer { metrics.confirmWait.record(ContinuousClock.now - began) }
        do {
            outcomes = try await confirms.outcomes()
            MessageTracing.endPublishSpans(publishSpans, outcomes: outcomes)
        } catch {
            MessageTracing.fail(publishSpans, error)
            guard error.code == .timeout else { throw error }
            metrics.countConfirms(.timeout, by: plans.reduce(0) { $0 + $1.messages.count })
            let reason = "publisher confirms timed out after \(DurationText.format(confirmTimeout))"
            return Dictionary(uniqueKeysWithValues: plans.indices.map { ($0, PublishFailure(reason: reason)) })
        }
        countConfirms(outcomes)
        var failures: [Int: PublishFailure] = [:]
        var offset = 0
        for (index, plan) in plans.enumerated() {
            let slice = outcomes[offset..<offset + plan.messages.count]
            if let failure = plan.failure(in: slice) {
                failures[index] = PublishFailure(reason: failure, isPermanent: plan.isUnpublishable(in: slice))
            } else if let lost = plan.undeliveredResult(in: slice) {
                logger.error("dead-lettered, but its rejected result was not taken",
                             metadata: ["message_id": "\(plan.original.properties.messageID ?? "")", "error": "\(lost)"])
            }
            let returnedCopies = plan.returnedReplyCopies(in: slice)
            if returnedCopies > 0 { metrics.unroutableReplyCopies.increment(by: Int64(returnedCopies)) }
            offset += plan.messages.count
        }
        return failures
    }

    /// One `basic.ack` with `multiple` for the whole batch when every delivery is acknowledged, else one
    /// settlement per delivery: requeued, rejected to the broker's dead-lettering (`basic.nack` without requeue:
    /// the work queue's dead-letter exchange gets it whole, with `x-death`), or acknowledged.
    private func acknowledge(
        _ deliveries: [AMQPDelivery], plans: [DeliveryPlan], requeue: Set<Int>, last: AMQPDelivery,
        on channel: AMQPChannel
    ) async throws {
        if requeue.isEmpty && !plans.contains(where: \.isRejectedToBroker) {
            try await channel.ack(last, multiple: true)
            return
        }
        for (index, delivery) in deliveries.enumerated() {
            if requeue.contains(index) {
                try await channel.nack(delivery, requeue: true)
            } else if plans[index].isRejectedToBroker {
                try await channel.nack(delivery, requeue: false)
            } else {
                try await channel.ack(delivery)
            }
        }
    }

    private func countConfirms(_ outcomes: [AMQPPublishOutcome]) {
        var confirmed = 0, nacked = 0, returned = 0, unencodable = 0
        for outcome in outcomes {
            switch outcome {
            case .confirmed: confirmed += 1
            case .nacked: nacked += 1
            case .returned: returned += 1
            case .unencodable: unencodable += 1
            }
        }
        metrics.countConfirms(.confirmed, by: confirmed)
        metrics.countConfirms(.nacked, by: nacked)
        metrics.countConfirms(.returned, by: returned)
        metrics.countConfirms(.unencodable, by: unencodable)
    }

    /// Metrics and a log line for a delivery that has left the work queue.
    private func record(_ plan: DeliveryPlan, of delivery: AMQPDelivery, elapsed: Duration, span: (any Span)?) {
        // Only the lines about this delivery carry its trace: `trace_id`, `span_id` (see `MessageTracing`).
        func logMetadata(_ extra: Logger.Metadata = [:]) -> Logger.Metadata {
            delivery.logMetadata(extra, span: span)
        }
        metrics.processingTime.record(elapsed)
        if plan.skippedReplyCopies > 0 {
            metrics.skippedReplyCopies.increment(by: Int64(plan.skippedReplyCopies))
            logger.warning("reply_to is malformed (not UTF-8, or a direct reply-to address RabbitMQ cannot decode); its copies were not published",
                           metadata: logMetadata(["reply_to": "\(delivery.properties.replyTo ?? "")"]))
        }
        if delivery.redelivered { metrics.redeliveries.increment() }
        if let timestamp = delivery.properties.timestamp {
            let lag = Date().timeIntervalSince1970 - Double(timestamp)
            if lag >= 0 { metrics.processingLag.record(.milliseconds(Int64(lag * 1000))) }
        }
        switch plan.route {
        case .retry(let attempt, let error):
            metrics.retries.increment()
            let copy = plan.messages.first
            logger.warning("sent to the retry queue",
                           metadata: logMetadata([
                               "attempt": "\(attempt)", "error": "\(error)",
                               "retry_queue": "\(copy?.routingKey ?? "?")",
                               "expiration_ms": "\(copy?.properties.expiration ?? String(retry.firstDelay.milliseconds))",
                           ]))
            return
        case .retriesExhausted(let attempts, let error):
            metrics.countDeadLetter(reason: .retriesExhausted)
            logger.error("dead-lettered after the last attempt",
                         metadata: logMetadata(["attempts": "\(attempts)", "error": "\(error)"]))
            return
        case .storeRefused(let reason):
            metrics.countDeadLetter(reason: .storeRefused)
            logger.error("dead-lettered: the store refused it",
                         metadata: logMetadata(["reason": "\(reason)"]))
            return
        case .poison(let reason):
            metrics.countDeadLetter(reason: .poison)
            logger.error("dead-lettered unprocessed: it failed too often",
                         metadata: logMetadata(["reason": "\(reason)"]))
            return
        case .unpublishable(let reason):
            metrics.countDeadLetter(reason: .unpublishable)
            logger.error("dead-lettered: a result cannot be published",
                         metadata: logMetadata(["reason": "\(reason)"]))
            return
        case .rejectedToBroker(let reason):
            metrics.countDeadLetter(reason: .rejectedToBroker)
            logger.warning("rejected to the broker's dead-lettering",
                           metadata: logMetadata(["reason": "\(reason)"]))
        case .deadLetter(let reason) where plan.stored == nil:
            // A body never read, failing transiently with the rest of its batch (see `DeliveryPlan`).
            metrics.countDeadLetter(reason: .rejected)
            logger.warning("dead-lettered", metadata: logMetadata(["reason": "\(reason)"]))
            return
        case .deadLetter, .results:
            break
        }
        guard let stored = plan.stored else { return }
        let decision = stored.decision
        metrics.countMessage(
            sender: decision.sender, isInstallation: delivery.isDeviceInstallation, outcome: decision.outcome)
        if stored.isReplay { metrics.replays.increment() }
        if delivery.properties.messageID?.isEmpty ?? true { metrics.withoutMessageID.increment() }
        let level: Logger.Level
        switch plan.route {
        case .deadLetter: level = .warning
        default: level = decision.outcome == .domainError ? .info : .debug
        }
        if case .deadLetter = plan.route { metrics.countDeadLetter(reason: .rejected) }
        if case .rejectedToBroker = plan.route { return }
        // Built only when it will be written: this runs for every message.
        guard logger.logLevel <= level else { return }
        var metadata = logMetadata(["outcome": "\(decision.outcome.rawValue)"])
        if let sender = decision.sender { metadata["sender"] = "\(sender)" }
        if let card = decision.digitalCardId { metadata["digitalCardId"] = "\(card)" }
        if stored.isReplay { metadata["replay"] = "true" }
        if case .deadLetter(let reason) = plan.route {
            metadata["reason"] = "\(reason)"
            logger.log(level: level, "rejected and dead-lettered", metadata: metadata)
        } else {
            logger.log(level: level, "processed", metadata: metadata)
        }
    }
}

extension AMQPDelivery {
    var isDeviceInstallation: Bool {
        properties.type == NotificationRouter.deviceInstallationType
            || properties.type == NotificationRouter.deviceInstallationDeletedType
    }

    /// The delivery's log metadata; with its message span when tracing is on.
    func logMetadata(_ extra: Logger.Metadata = [:], span: (any Span)? = nil) -> Logger.Metadata {
        var metadata = extra
        metadata["message_id"] = "\(properties.messageID ?? "")"
        metadata["delivery_tag"] = "\(deliveryTag)"
        if let span { metadata.merge(MessageTracing.logMetadata(of: span)) { current, _ in current } }
        return metadata
    }
}

extension Array {
    /// The element at `index`, or nil past the end (the span arrays are empty when tracing is off).
    subscript(safe index: Int) -> Element? {
        indices.contains(index) ? self[index] : nil
    }
}

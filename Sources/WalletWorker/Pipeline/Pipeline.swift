import AMQPTransport
import Logging
import Tracing

/// The executor of one pipeline's lifecycle actions: it opens sessions through the broker seam (`BrokerConnector`:
/// deliveries and acknowledgements on one connection, results on another, so a publish that waits on a congested
/// socket never delays acknowledgements), and runs the actions `DeliveryLifecycle` hands it in their order,
/// reporting what the broker and the store answer: from its inbox, one after another, or, for those that only hand
/// work over (`store`, `publish`, `settle`, `report`), where they arrive when nothing older is in hand
/// (`runDirectly`). It decides nothing: when to store, publish, settle, retry, reconnect or stop is the lifecycle's.
struct Pipeline: Sendable {
    var index: Int
    /// The work queue, or a shard of the ordered mode.
    var queue: ConsumedQueue
    var configuration: WorkerConfiguration
    var broker: any BrokerConnector
    var storage: BatchStorage
    var driver: LifecycleDriver
    var observer: LifecycleObserver
    var metrics: WorkerMetrics
    var stop: StopSignal
    var clock: WorkerClock
    var logger: Logger

    /// Runs the pipeline's actions until the lifecycle stops it (or the task is cancelled).
    func run() async {
        let inFlight = observer.inFlight
        let registration = metrics.trackInFlight { inFlight.current }
        defer { registration.end() }
        var inbox = driver.inboxes[index].makeAsyncIterator()
        while let action = await inbox.next() {
            // Every action taken from the inbox is reported run (`LifecycleDriver.ran`); between sessions no action
            // runs directly, so at once. A session's, when it has run (`runSession`).
            driver.ran(in: index)
            switch action {
            case .connect(let id, let delay, let release):
                if delay > .zero { await stop.sleep(for: delay) }
                await runSession(id, release: release, inbox: &inbox)
            case .stopPipeline:
                return
            case .report(let event):
                observer.observe(event)
            default:
                break  // an action of a session that has ended
            }
        }
    }

    // MARK: - A session

    /// What a session opened, closed when it ends.
    private final class SessionResources: @unchecked Sendable {
        // Set by `open` before any child task starts and before the session's direct actions are registered (under
        // the driver's lock), read after: no concurrent writes.
        var session: (any BrokerSession)?
    }

    /// Opens the session, runs its actions until `endSession`, closes it (its consume channel first) and reports
    /// `sessionClosed`.
    private func runSession(
        _ id: DeliveryLifecycle.SessionID, release: ConsumerRelease?,
        inbox: inout AsyncStream<LifecycleAction>.AsyncIterator
    ) async {
        let resources = SessionResources()
        let replies = DirectReplyPublisher(metrics: metrics, clock: clock, logger: logger) {
            try await broker.openReplyConnection(pipeline: index)
        }
        let (replyCopies, replyInput) = AsyncStream<[AMQPOutboundMessage]>.makeStream()
        // Publishes are confirmed by the broker in the order they were sent: their confirms are reported in that
        // order too, so that each batch is settled after the one before it and acknowledged with `multiple`.
        let (confirmWaits, confirmInput) = AsyncStream<ConfirmWait>.makeStream()
        // The lifecycle has at most one batch of a session at the store at a time: one task stores them in turn.
        let (storeRequests, storeInput) = AsyncStream<StoreRequest>.makeStream()
        let streams = SessionStreams(confirms: confirmInput, stores: storeInput)
        do {
            let session = try await open(release: release)
            resources.session = session
            driver.runDirectly(in: index) { action in
                runDirectly(action, id, resources, streams)
            }
            driver.handle {
                $0.sessionStarted(id, frameMax: session.frameMax, consumers: session.consumersWhenStarted, now: $1)
            }
        } catch {
            // A login refused after the first (a rotated password): counted, retried like any lost session.
            metrics.recordSessionFailure(error)
            driver.handle { $0.sessionFailed(id, error: error, now: $1) }
        }
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await wait in confirmWaits {
                    await awaitConfirms(wait.pending, wait.publishID, messages: wait.messages, spans: wait.spans, id)
                }
            }
            group.addTask {
                for await request in storeRequests {
                    let answer = await storage.store(request.deliveries.map(\.original), oneAtATime: request.oneAtATime)
                    MessageTracing.endStoreSpans(request.spans, failure: answer.failure)
                    driver.handle { $0.storeAnswered(id, request.batch, answer, now: $1) }
                }
            }
            if let session = resources.session {
                group.addTask { await read(session, id) }
                for connection in SessionConnection.allCases {
                    group.addTask { await watch(session, connection, id) }
                }
                group.addTask {
                    for await copies in replyCopies { await replies.send(copies) }
                }
            }
            while let action = await inbox.next() {
                switch action {
                case .endSession(let session, let end) where session == id:
                    driver.runDirectly(in: index, nil)
                    driver.ran(in: index)
                    // A shard's channel is closed before anything cancels its consumer (cancelling the reading
                    // task, closing the connection): the broker requeues what is not settled, in place, and
                    // activates the standby in the same step.
                    if queue.isShard, let session = resources.session {
                        if case .failed = end {} else { await session.closeConsumeChannel() }
                    }
                    replyInput.finish()
                    streams.finish()
                    group.cancelAll()
                    return
                default:
                    await execute(action, id, resources, replies: replyInput, streams)
                    driver.ran(in: index)
                }
            }
            // Cancelled (the shutdown grace period is over): what is not settled is redelivered by the broker.
            driver.runDirectly(in: index, nil)
            replyInput.finish()
            streams.finish()
            group.cancelAll()
        }
        await close(resources, replies: replies)
        driver.handle { $0.sessionClosed(id, now: $1) }
    }

    /// Connects, declares, opens the channels and starts consuming (once the broker has let go of a failed
    /// session's consumer, with `release`); takes nothing once the worker is stopping.
    private func open(release: ConsumerRelease?) async throws -> any BrokerSession {
        guard !stop.isStopped else { throw CancellationError() }
        let (stop, clock, logger) = (stop, clock, logger)
        return try await broker.openSession(pipeline: index, queue: queue) { countConsumers in
            if let release {
                try await Self.waitForRelease(release, countConsumers, stop: stop, clock: clock, logger: logger)
            }
            return !stop.isStopped
        }
    }

    /// Counts the queue's consumers until `release` says the failed session's consumer is gone (or its bound has
    /// passed), sleeping on the clock between counts; returns early on a stop.
    private static func waitForRelease(
        _ release: ConsumerRelease, _ countConsumers: @Sendable () async throws -> Int, stop: StopSignal,
        clock: WorkerClock, logger: Logger
    ) async throws {
        var waited = false
        while !stop.isStopped {
            let consumers = try await countConsumers()
            switch release.next(consumers: consumers, now: clock.now) {
            case .consumeReleased:
                if waited { logger.info("the broker let go of the last session's consumer: consuming") }
                return
            case .consumeBoundPassed:
                logger.notice(
                    "consuming after waiting for the broker to drop the last session's consumer: its bound passed",
                    metadata: [
                        "consumers": "\(consumers)",
                        "last_session_consumers": "\(release.consumersWithTheLastSession)",
                    ])
                return
            case .countAgain(let delay):
                if !waited {
                    logger.info(
                        """
                        waiting for the broker to drop the last session's consumer before consuming, so that the \
                        deliveries it still holds come back first
                        """,
                        metadata: [
                            "consumers": "\(consumers)",
                            "last_session_consumers": "\(release.consumersWithTheLastSession)",
                        ])
                    waited = true
                }
                await stop.sleep(for: delay)
            }
        }
    }

    /// Runs one action of session `id` taken from the inbox.
    private func execute(
        _ action: LifecycleAction, _ id: DeliveryLifecycle.SessionID, _ resources: SessionResources,
        replies: AsyncStream<[AMQPOutboundMessage]>.Continuation, _ streams: SessionStreams
    ) async {
        if runDirectly(action, id, resources, streams) { return }
        switch action {
        case .sendDirectReplies(let session, let copies) where session == id:
            replies.yield(copies)
        case .cancelConsumer(let session) where session == id:
            await resources.session?.cancelConsumer()
        default:
            break  // an action of another (ended) session
        }
    }

    /// Runs a `store`, `publish`, `settle` or `report` of session `id` in whichever thread dispatches it
    /// (`LifecycleDriver.DirectActions`): a store is handed to the session's store task, a publish or a settle to a
    /// connection's I/O thread, and a report only counts and logs. A publish's confirms are awaited by the session's
    /// confirm task; a failed send fails the connection, which `watch` reports. False for other actions.
    private func runDirectly(
        _ action: LifecycleAction, _ id: DeliveryLifecycle.SessionID, _ resources: SessionResources,
        _ streams: SessionStreams
    ) -> Bool {
        switch action {
        case .store(let session, let batch, let deliveries, let oneAtATime) where session == id:
            metrics.batchSize.record(Double(deliveries.count))
            let spans = observer.tracing?.startStoreSpans(id, deliveries) ?? []
            streams.stores.yield(
                StoreRequest(batch: batch, deliveries: deliveries, oneAtATime: oneAtATime, spans: spans))
            return true
        case .publish(let session, let publishID, let tags, let plans) where session == id:
            guard let session = resources.session else { return true }
            var messages: [AMQPOutboundMessage] = []
            messages.reserveCapacity(plans.reduce(0) { $0 + $1.messages.count })
            for plan in plans { messages += plan.messages }
            let spans = observer.tracing?.startPublishSpans(id, tags: tags, plans: plans) ?? []
            let pending = session.startPublishing(messages, confirmTimeout: configuration.confirmTimeout)
            streams.confirms.yield(
                ConfirmWait(pending: pending, publishID: publishID, messages: messages, spans: spans))
            return true
        case .settle(let session, let settlements) where session == id:
            resources.session?.startSettling(
                settlements.map {
                    switch $0 {
                    case .ack(let tag, let multiple): .ack(deliveryTag: tag, multiple: multiple)
                    case .requeue(let tag): .nack(deliveryTag: tag, requeue: true)
                    case .reject(let tag): .nack(deliveryTag: tag, requeue: false)
                    }
                })
            return true
        case .report(let event):
            observer.observe(event)
            return true
        default:
            return false
        }
    }

    /// Hands the consumer's deliveries to the lifecycle; reports the consumer's end or failure.
    private func read(_ session: any BrokerSession, _ id: DeliveryLifecycle.SessionID) async {
        do {
            while let received = try await session.nextDeliveries() {
                guard !received.isEmpty else { continue }
                let now = driver.now
                let deliveries = received.map {
                    DeliveryLifecycle.Delivery(
                        tag: $0.deliveryTag, original: OriginalMessage($0), redelivered: $0.redelivered, receivedAt: now
                    )
                }
                driver.handle { $0.batchReceived(id, deliveries, now: $1) }
            }
            driver.handle { $0.consumerEnded(id, now: $1) }
        } catch {
            driver.handle { $0.sessionFailed(id, error: error, now: $1) }
        }
    }

    /// The session's work handed to its store and confirm tasks.
    private struct SessionStreams: Sendable {
        var confirms: AsyncStream<ConfirmWait>.Continuation
        var stores: AsyncStream<StoreRequest>.Continuation

        func finish() {
            confirms.finish()
            stores.finish()
        }
    }

    /// A batch for the store.
    private struct StoreRequest: Sendable {
        var batch: DeliveryLifecycle.BatchID
        var deliveries: [DeliveryLifecycle.Delivery]
        var oneAtATime: Bool
        var spans: [any Span]
    }

    /// A publish whose confirms are awaited, in the order of the publishes.
    private struct ConfirmWait: Sendable {
        var pending: any PublishConfirmation
        var publishID: DeliveryLifecycle.PublishID
        /// What was published, in order: the confirms' outcomes are counted by their message's exchange.
        var messages: [AMQPOutboundMessage]
        var spans: [any Span]
    }

    /// Waits for a publish's confirms and reports them; a failed channel or connection fails the session.
    private func awaitConfirms(
        _ pending: any PublishConfirmation, _ publishID: DeliveryLifecycle.PublishID, messages: [AMQPOutboundMessage],
        spans: [any Span],
        _ id: DeliveryLifecycle.SessionID
    ) async {
        let began = clock.now
        let result: Result<[AMQPPublishOutcome], AMQPError>
        do {
            result = .success(try await pending.outcomes())
        } catch {
            result = .failure(error)
        }
        metrics.confirmWait.record(clock.now - began)
        switch result {
        case .success(let outcomes):
            MessageTracing.endPublishSpans(spans, outcomes: outcomes)
            metrics.countConfirms(outcomes, of: messages)
            driver.handle { $0.confirmsArrived(id, publishID, .outcomes(outcomes), now: $1) }
        case .failure(let error) where error.code == .timeout:
            MessageTracing.fail(spans, error)
            metrics.countConfirms(.timeout, by: messages.count)
            let timeout = configuration.confirmTimeout
            driver.handle { $0.confirmsArrived(id, publishID, .timedOut(after: timeout), now: $1) }
        case .failure(let error):
            MessageTracing.fail(spans, error)
            driver.handle { $0.sessionFailed(id, error: error, now: $1) }
        }
    }

    /// Logs blocked and unblocked; reports the session failed when the connection ends under it.
    private func watch(
        _ session: any BrokerSession, _ connection: SessionConnection, _ id: DeliveryLifecycle.SessionID
    ) async {
        let role = connection.rawValue
        var blocked = false
        defer { if blocked { metrics.blockedConnections.decrement() } }
        for await event in session.events(of: connection) {
            switch event {
            case .blocked(let reason):
                logger.warning(
                    "the broker blocked the connection (resource alarm)",
                    metadata: ["connection": "\(role)", "reason": "\(reason)"])
                if !blocked { metrics.blockedConnections.increment() }
                blocked = true
            case .unblocked:
                logger.notice("the broker unblocked the connection", metadata: ["connection": "\(role)"])
                if blocked { metrics.blockedConnections.decrement() }
                blocked = false
            case .closed(let error):
                let error = error ?? AMQPError(code: .closed, message: "the \(role) connection closed")
                driver.handle { $0.sessionFailed(id, error: error, now: $1) }
                return
            }
        }
    }

    /// Closes the session's connections. Cancelled (the shutdown grace period is over), it does not wait for the
    /// broker's answer, which a blocked connection (a resource alarm) would never send: the sockets are shut.
    private func close(_ resources: SessionResources, replies: DirectReplyPublisher) async {
        let timeout: Duration = Task.isCancelled ? .milliseconds(100) : .seconds(5)
        await replies.close(timeout: timeout)
        await resources.session?.close(timeout: timeout)
    }
}

extension WorkerMetrics {
    /// Counts each publish's outcome (`outcomes[i]` is `messages[i]`'s), a return by its message's exchange.
    func countConfirms(_ outcomes: [AMQPPublishOutcome], of messages: [AMQPOutboundMessage]) {
        var confirmed = 0
        var nacked = 0
        var returned: [String: Int] = [:]
        var unencodable = 0
        for (outcome, message) in zip(outcomes, messages) {
            switch outcome {
            case .confirmed: confirmed += 1
            case .nacked: nacked += 1
            case .returned: returned[message.exchange, default: 0] += 1
            case .unencodable: unencodable += 1
            }
        }
        countConfirms(.confirmed, by: confirmed)
        countConfirms(.nacked, by: nacked)
        for (exchange, count) in returned { countReturned(exchange: exchange, by: count) }
        countConfirms(.unencodable, by: unencodable)
    }
}

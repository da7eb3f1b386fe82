import AMQPTransport
import Logging
import WalletMessages
import WalletRouting

/// The broker objects of CONTRACT.md §1, by name, and how the work queue is declared.
public struct Topology: Sendable, Hashable {
    public enum QueueType: String, Sendable, CaseIterable {
        /// A classic durable queue. Default.
        case classic
        /// A replicated quorum queue with a delivery limit for poison messages.
        case quorum
    }

    /// The topic exchange the backend fan-out publishes to. Default: `wallet.notifications`.
    public var inboundExchange = "wallet.notifications"
    /// Default: `wallet.notifications.work`.
    public var workQueue = "wallet.notifications.work"
    /// Default: `wallet.notifications.retry`.
    public var retryQueue = "wallet.notifications.retry"
    /// Default: `wallet.notifications.dlx`.
    public var deadLetterExchange = "wallet.notifications.dlx"
    /// Default: `wallet.notifications.dead`.
    public var deadLetterQueue = "wallet.notifications.dead"
    /// The type of every queue the worker declares: the work queue, the shards, the retry queues and the
    /// dead-letter queue. Default: `classic`.
    public var workQueueType = QueueType.classic
    /// Quorum queues only: deliveries of one message before the broker dead-letters it (a message that crashes
    /// the worker every time). Default: `20`.
    public var deliveryLimit = 20
    /// Where results are published. Default: `wallet.events`, `wallet.transactions`, `wallet.replenishment`,
    /// `wallet.actions`, `wallet.installations`.
    public var resultExchanges = RoutingSettings.ResultExchanges()
    /// The ordered mode: this many consistent-hash shard queues, each with a single active consumer, take the
    /// inbound messages instead of the work queue (`ShardedTopology`). `0` is the default mode. Default: `0`.
    public var orderedShards = 0

    public init() {}

    /// Declares everything on one channel, idempotently, stopping at the first failure (the broker closes the
    /// channel on a 404 or 406, so nothing can follow on it). A queue that exists with other arguments (another
    /// retry delay, another queue type) fails with the broker's 406 PRECONDITION_FAILED, which `TopologyError`
    /// explains. `declare(on:retry:logger:metrics:)` (on a connection) goes on past a secondary queue
    /// it cannot declare.
    func declare(on channel: AMQPChannel, retry: RetrySchedule) async throws {
        for step in declarationPlan(retry: retry) {
            do throws(AMQPError) {
                try await step.perform(on: channel)
            } catch {
                switch failureDecision(step: step, replyCode: error.replyCode) {
                case .stop(let explanation): throw TopologyError(underlying: error, explanation: explanation)
                case .skip, .reconnect: throw error
                }
            }
        }
    }

    /// Declares everything, idempotently: at start-up, after every reconnect, and by `wallet-worker declare`.
    /// The essential step (exchanges, the work queue or the shards, their bindings) comes first; a secondary
    /// queue (a retry queue, the dead-letter queue) the broker cannot declare now (404 NOT_FOUND: its home node
    /// is down) is logged, counted and skipped, on a fresh channel, so the worker consumes what is available;
    /// the next declaration (the next reconnect) tries it again. Returns the queues skipped.
    /// Throws `TopologyError` for what reconnecting cannot fix (406 PRECONDITION_FAILED, a missing plugin), and
    /// the transport's error for anything else (the caller reconnects).
    @discardableResult
    func declare(
        on connection: AMQPConnection, retry: RetrySchedule, logger: Logger, metrics: WorkerMetrics? = nil
    ) async throws -> [String] {
        var channel = try await connection.openChannel()
        var skipped: [String] = []
        for step in declarationPlan(retry: retry) {
            do throws(AMQPError) {
                try await step.perform(on: channel)
            } catch {
                var decision = failureDecision(step: step, replyCode: error.replyCode)
                if error.replyCode == 406, let legacy = step.legacy {
                    // Declared by an earlier version, without the arguments added since (at-least-once
                    // dead-lettering, the dead-letter queue's loop): accepted as it is, with a warning that says
                    // what it lacks and how to add it. Anything else that differs still stops the worker.
                    channel = try await connection.openChannel()
                    do throws(AMQPError) {
                        try await legacy.perform(on: channel)
                        logger.warning(
                            "\(step.secondaryQueue ?? workQueue) was declared by an earlier version: \(Self.legacyExplanation)",
                            metadata: ["queue": "\(step.secondaryQueue ?? workQueue)"])
                        continue
                    } catch {
                        decision = failureDecision(step: step, replyCode: error.replyCode)
                    }
                }
                switch decision {
                case .stop(let explanation):
                    throw TopologyError(underlying: error, explanation: explanation)
                case .reconnect:
                    throw error
                case .skip:
                    let queue = step.secondaryQueue ?? "?"
                    logger.warning(
                        "could not declare \(queue); consuming without it, declared again at the next reconnect",
                        metadata: [
                            "queue": "\(queue)", "reply_code": "\(error.replyCode.map(String.init) ?? "none")",
                            "error": "\(error.replyText ?? error.message)",
                        ])
                    metrics?.topologySkips.increment()
                    skipped.append(queue)
                    // The broker closed the channel with the 404: the next steps need a new one.
                    channel = try await connection.openChannel()
                }
            }
        }
        try await channel.close()
        return skipped
    }

    /// The declaration in order: one essential step, then one step per secondary queue (each retry level of
    /// each consumed queue, the dead-letter queue).
    func declarationPlan(retry: RetrySchedule) -> [TopologyStep] {
        var essential: [TopologyOperation] = [
            .declareExchange(inboundExchange, type: "topic", arguments: [:]),
            .declareExchange(deadLetterExchange, type: "fanout", arguments: [:]),
        ]
        essential += resultExchangeNames.map { .declareExchange($0, type: "topic", arguments: [:]) }
        essential.append(.declareQueue(workQueue, arguments: workQueueArguments))
        var secondary: [TopologyStep] = []
        if let sharded {
            // The shards are bound before the work queue is unbound: a message published in between reaches
            // both (deduplicated by its message_id) rather than neither.
            essential += sharded.essentialOperations
            essential.append(.unbindQueue(workQueue, exchange: inboundExchange, routingKey: "#"))
            secondary += retryQueueSteps(retry: retry, base: retryQueue, deadLetterTo: workQueue)
            for index in 0..<sharded.count {
                secondary += retryQueueSteps(
                    retry: retry, base: sharded.retryQueue(index), deadLetterTo: sharded.queue(index))
            }
        } else {
            essential.append(.bindQueue(workQueue, exchange: inboundExchange, routingKey: "#"))
            secondary += retryQueueSteps(retry: retry, base: retryQueue, deadLetterTo: workQueue)
        }
        secondary.append(deadLetterQueueStep)
        return [TopologyStep(operations: essential, secondaryQueue: nil, isRetryQueue: false)] + secondary
    }

    /// The dead-letter queue, bound to the dead-letter exchange, with its loop: a fanout exchange bound to it
    /// alone and named as its own dead-letter exchange, so a message rejected from it goes back to its tail
    /// whole (the dead-letter tool moves what it looks at that way).
    var deadLetterQueueStep: TopologyStep {
        TopologyStep(
            operations: [
                .declareExchange(deadLetterLoopExchange, type: "fanout", arguments: [:]),
                .declareQueue(deadLetterQueue, arguments: deadLetterQueueArguments),
                .bindQueue(deadLetterQueue, exchange: deadLetterExchange, routingKey: ""),
                .bindQueue(deadLetterQueue, exchange: deadLetterLoopExchange, routingKey: ""),
            ],
            secondaryQueue: deadLetterQueue, isRetryQueue: false)
    }

    /// Declares the dead-letter queue as this version does, for `wallet-worker dead-letters`: true when the broker
    /// took it (the queue has its loop), false when the queue exists as an earlier version declared it (no loop:
    /// a message rejected from it would be dropped). Throws `TopologyError` or the transport's error otherwise.
    public func declareDeadLetterQueue(on connection: AMQPConnection) async throws -> Bool {
        let step = deadLetterQueueStep
        var channel = try await connection.openChannel()
        do throws(AMQPError) {
            try await step.perform(on: channel)
            try? await channel.close()
            return true
        } catch {
            guard error.replyCode == 406, let legacy = step.legacy else {
                throw TopologyError(underlying: error, explanation: Self.deadLetterQueueExplanation(error))
            }
            channel = try await connection.openChannel()
            do throws(AMQPError) {
                try await legacy.perform(on: channel)
            } catch {
                throw TopologyError(underlying: error, explanation: Self.deadLetterQueueExplanation(error))
            }
            try? await channel.close()
            return false
        }
    }

    static func deadLetterQueueExplanation(_ error: AMQPError) -> String {
        switch error.replyCode {
        case 403: TopologyError.accessRefused
        case 406: TopologyError.conflictingArguments
        default: "the dead-letter queue could not be declared"
        }
    }

    /// What a queue declared by an earlier version lacks, and how to get it.
    static let legacyExplanation =
        "it lacks the arguments this version declares (quorum queues: x-dead-letter-strategy at-least-once with "
        + "x-overflow reject-publish, so the broker's own dead letters are confirmed; the dead-letter queue: its loop "
        + "exchange and, for quorum, an unlimited delivery limit, so looking at it never drops a message). It is used "
        + "as it is; see the runbook (docs/operations.md, dead letters) to re-declare it"

    /// The dead-letter queue's own dead-letter exchange: `<dead-letter queue>.loop`, bound to it alone.
    public var deadLetterLoopExchange: String { DeadLetterLoop.exchange(of: deadLetterQueue) }

    /// Quorum only: the dead-letter queue's delivery limit. RabbitMQ 4 gives every quorum queue a limit of 20 by
    /// default and drops (or dead-letters) a message returned more often, and a dead letter is returned each time
    /// a look at the queue is interrupted. Negative values mean "no limit" on RabbitMQ 4 but "every return is over
    /// the limit" on 3.x, so this is the largest limit both read alike.
    public static let deadLetterQueueDeliveryLimit: Int64 = 2_147_483_647

    /// Quorum queues dead-letter at least once: the broker keeps a message it dead-letters until the dead-letter
    /// queue confirms it (the default, at-most-once, loses it when that route is down). RabbitMQ needs
    /// `reject-publish` overflow for it (with no length limit it never rejects a publish).
    static let atLeastOnceDeadLettering: [(String, AMQPFieldValue)] = [
        ("x-dead-letter-strategy", .string("at-least-once")), ("x-overflow", .string("reject-publish")),
    ]

    /// One secondary step per retry level of the queue `queue`, whose level-1 retry queue is `base`.
    func retryQueueSteps(retry: RetrySchedule, base: String, deadLetterTo queue: String) -> [TopologyStep] {
        retry.queues(base).map { level in
            TopologyStep(
                operations: [
                    .declareQueue(
                        level.name, arguments: retryQueueArguments(retryDelay: level.ttl, deadLetterTo: queue))
                ],
                secondaryQueue: level.name, isRetryQueue: true)
        }
    }

    /// What a failed step means: a 406 or a missing plugin stops the worker with an explanation; a 404 on a
    /// secondary queue (its home node is down, or similar) is skipped; anything else ends the session.
    func failureDecision(step: TopologyStep, replyCode: UInt16?) -> TopologyFailureDecision {
        switch replyCode {
        case 406:
            if step.isRetryQueue && workQueueType == .quorum {
                return .stop(explanation: Self.retryQueueMigration)
            }
            return .stop(explanation: TopologyError.conflictingArguments)
        case 403:
            // ACCESS_REFUSED: this user may not configure; reconnecting will not give it the right.
            return .stop(explanation: TopologyError.accessRefused)
        case 503 where step.operations.contains(where: \.declaresConsistentHashExchange):
            // 503 COMMAND_INVALID "unknown exchange type": reconnecting will not install the plugin.
            return .stop(explanation: ShardedTopology.missingPluginExplanation)
        case 404 where step.secondaryQueue != nil:
            return .skip
        default:
            return .reconnect
        }
    }

    /// A 406 on the retry queue in quorum mode: most likely a classic retry queue declared by an earlier version
    /// (which declared only the work, shard and dead-letter queues as quorum).
    static let retryQueueMigration =
        "the retry queue exists with other arguments. With --queue-type quorum every queue is quorum, the retry "
        + "queues too; one declared by an earlier version is classic (or it has another retry delay: see the "
        + "broker's text). Either give the retry queue a new name (--retry-queue, e.g. wallet.notifications.retry.q): "
        + "the old one keeps dead-lettering its messages to the work queue as their delay ends, delete it once "
        + "empty; or scale the workers to 0, wait the retry delay until the retry queue is empty "
        + "(rabbitmqctl list_queues name messages), delete it (rabbitmqctl delete_queue <name> --if-empty) and start "
        + "the workers, which declare it as a quorum queue"

    var resultExchangeNames: [String] {
        [
            resultExchanges.events, resultExchanges.transactions, resultExchanges.replenishment,
            resultExchanges.actions, resultExchanges.installations,
        ]
    }

    var workQueueArguments: AMQPTable {
        var arguments: AMQPTable = ["x-dead-letter-exchange": .string(deadLetterExchange)]
        if workQueueType == .quorum {
            arguments["x-queue-type"] = .string("quorum")
            arguments["x-delivery-limit"] = .int64(Int64(deliveryLimit))
            for (key, value) in Self.atLeastOnceDeadLettering { arguments[key] = value }
        }
        return arguments
    }

    /// Messages wait out the delay, then the broker dead-letters them back to the work queue through the
    /// default exchange. Quorum in quorum mode (RabbitMQ 3.10+ expires and dead-letters quorum queue messages):
    /// a classic retry queue would stop every reconnect while its one node is down.
    func retryQueueArguments(retryDelay: Duration) -> AMQPTable {
        retryQueueArguments(retryDelay: retryDelay, deadLetterTo: workQueue)
    }

    /// A retry queue dead-lettering to `queue` after the delay (the work queue, or a shard).
    func retryQueueArguments(retryDelay: Duration, deadLetterTo queue: String) -> AMQPTable {
        var arguments: AMQPTable = [
            "x-message-ttl": .int64(Int64(retryDelay.milliseconds)),
            "x-dead-letter-exchange": .string(""),
            "x-dead-letter-routing-key": .string(queue),
        ]
        if workQueueType == .quorum {
            arguments["x-queue-type"] = .string("quorum")
            for (key, value) in Self.atLeastOnceDeadLettering { arguments[key] = value }
        }
        return arguments
    }

    /// Same queue type as the work queue, so a quorum deployment keeps its dead letters replicated too; its own
    /// dead-letter exchange is its loop (see `deadLetterQueueStep`); quorum: no delivery limit to speak of. The
    /// loop is at-most-once: RabbitMQ 3.10's at-least-once worker stalls when a queue dead-letters into itself
    /// (measured: 32 moved, the rest held in its dead-letter state for good), while the default moves them at
    /// once within the queue.
    var deadLetterQueueArguments: AMQPTable {
        var arguments: AMQPTable = ["x-dead-letter-exchange": .string(deadLetterLoopExchange)]
        if workQueueType == .quorum {
            arguments["x-queue-type"] = .string("quorum")
            arguments["x-delivery-limit"] = .int64(Self.deadLetterQueueDeliveryLimit)
        }
        return arguments
    }
}

/// The broker refused the topology in a way reconnecting cannot fix: a queue or exchange already exists with
/// different settings, or the ordered mode's exchange type is not installed.
public struct TopologyError: Error, CustomStringConvertible {
    public var underlying: AMQPError
    /// What to do about it.
    public var explanation: String

    init(underlying: AMQPError, explanation: String = Self.conflictingArguments) {
        self.underlying = underlying
        self.explanation = explanation
    }

    static let accessRefused =
        "the broker user may not declare the topology (it has no configure permission on these names). Declare "
        + "it with a user that may (`wallet-worker declare`, e.g. the deploy job) and run the worker with "
        + "--no-declare (WALLET_NO_DECLARE=true)"

    static let conflictingArguments =
        "a queue or exchange exists with other arguments, e.g. another retry delay or queue type. Use the settings "
        + "it was declared with, or delete it (after draining) so the worker declares it anew"

    public var description: String {
        "the broker refused to declare the topology (\(underlying.replyText ?? "\(underlying)")): \(explanation)"
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

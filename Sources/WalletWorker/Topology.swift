import AMQPTransport
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
    /// Default: `classic`.
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

    /// Declares everything, idempotently: at start-up, after every reconnect, and by `wallet-worker declare`.
    /// A queue that exists with other arguments (another retry delay, another queue type) fails with the broker's
    /// 406 PRECONDITION_FAILED, which `TopologyError` explains.
    func declare(on channel: AMQPChannel, retryDelay: Duration) async throws {
        do {
            try await channel.declareExchange(inboundExchange, type: "topic")
            try await channel.declareExchange(deadLetterExchange, type: "fanout")
            for exchange in resultExchangeNames {
                try await channel.declareExchange(exchange, type: "topic")
            }
            try await channel.declareQueue(workQueue, arguments: workQueueArguments)
            if let sharded {
                // The shards are bound before the work queue is unbound: a message published in between reaches
                // both (deduplicated by its message_id) rather than neither.
                try await sharded.declare(on: channel, retryDelay: retryDelay)
                try await channel.unbindQueue(workQueue, exchange: inboundExchange, routingKey: "#")
            } else {
                try await channel.bindQueue(workQueue, exchange: inboundExchange, routingKey: "#")
            }
            try await channel.declareQueue(retryQueue, arguments: retryQueueArguments(retryDelay: retryDelay))
            try await channel.declareQueue(deadLetterQueue, arguments: deadLetterQueueArguments)
            try await channel.bindQueue(deadLetterQueue, exchange: deadLetterExchange, routingKey: "")
        } catch {
            // 406 PRECONDITION_FAILED: declared before with other arguments.
            guard let refused = error as? AMQPError, refused.replyCode == 406 else { throw error }
            throw TopologyError(underlying: refused)
        }
    }

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
        }
        return arguments
    }

    /// Messages wait out the delay, then the broker dead-letters them back to the work queue through the
    /// default exchange.
    func retryQueueArguments(retryDelay: Duration) -> AMQPTable {
        [
            "x-message-ttl": .int64(Int64(retryDelay.milliseconds)),
            "x-dead-letter-exchange": .string(""),
            "x-dead-letter-routing-key": .string(workQueue),
        ]
    }

    /// Same queue type as the work queue, so a quorum deployment keeps its dead letters replicated too.
    var deadLetterQueueArguments: AMQPTable {
        workQueueType == .quorum ? ["x-queue-type": .string("quorum")] : [:]
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

    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

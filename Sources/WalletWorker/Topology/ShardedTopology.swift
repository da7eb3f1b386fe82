import AMQPTransport

/// The ordered mode's broker objects (`--ordered-shards N`, CONTRACT.md §10): per-card order with several
/// consumers or replicas.
///
///     inbound (topic) ──#──► <inbound>.ordered (x-consistent-hash, hash-header digitalCardId)
///                                 ├─1─► <work queue>.shard.0   (single active consumer) ◄── <retry queue>.shard.0
///                                 ├─1─► …
///                                 └─1─► <work queue>.shard.N-1                          ◄── <retry queue>.shard.N-1
///
/// The exchange cannot read JSON bodies, so the publisher puts the card id in the `digitalCardId` header, and the
/// broker hashes that header: every message of a card lands in the same shard. A shard has a single active
/// consumer across all replicas, and that consumer processes one batch after another, so a card's messages are
/// processed in publication order. Messages without the header all hash alike (the broker hashes the absent
/// value) and land in one shard, in order among themselves.
///
/// Each shard has its own retry queue, dead-lettering back to that shard: a retried message returns to its own
/// shard, behind the messages that arrived meanwhile.
public struct ShardedTopology: Sendable, Hashable {
    /// The header the publisher sets to the message's `digitalCardId` (an AMQP string), hashed by the exchange.
    public static let cardHeader = "digitalCardId"
    /// The exchange type of the `rabbitmq_consistent_hash_exchange` plugin (bundled with RabbitMQ).
    public static let exchangeType = "x-consistent-hash"

    public let topology: Topology
    /// Number of shard queues; at least 1.
    public let count: Int

    init(topology: Topology, count: Int) {
        self.topology = topology
        self.count = count
    }

    /// The consistent-hash exchange bound to the inbound exchange with `#`. Default: `wallet.notifications.ordered`.
    public var hashExchange: String { "\(topology.inboundExchange).ordered" }

    /// Shard `index`'s queue. Default: `wallet.notifications.work.shard.<index>`.
    public func queue(_ index: Int) -> String { "\(topology.workQueue).shard.\(index)" }

    /// Shard `index`'s retry queue. Default: `wallet.notifications.retry.shard.<index>`.
    public func retryQueue(_ index: Int) -> String { "\(topology.retryQueue).shard.\(index)" }

    public var queues: [String] { (0..<count).map(queue) }
    public var retryQueues: [String] { (0..<count).map(retryQueue) }

    /// The exchange hashes the card header instead of the routing key, so routing keys keep their meaning.
    public var hashExchangeArguments: AMQPTable { ["hash-header": .string(Self.cardHeader)] }

    /// The work queue's arguments (dead-lettering, queue type, delivery limit) plus a single active consumer.
    public var queueArguments: AMQPTable {
        var arguments = topology.workQueueArguments
        arguments["x-single-active-consumer"] = .bool(true)
        return arguments
    }

    /// Like the plain retry queue (quorum in quorum mode), but dead-lettering back to its own shard.
    public func retryQueueArguments(_ index: Int, retryDelay: Duration) -> AMQPTable {
        topology.retryQueueArguments(retryDelay: retryDelay, deadLetterTo: queue(index))
    }

    /// The exchange, every shard and its binding, and the exchange's binding from the inbound exchange: what the
    /// shard pipelines consume. Idempotent: re-binding an existing binding adds no weight to the hash ring.
    var essentialOperations: [TopologyOperation] {
        var operations: [TopologyOperation] = [
            .declareExchange(hashExchange, type: Self.exchangeType, arguments: hashExchangeArguments)
        ]
        for index in 0..<count {
            operations.append(.declareQueue(queue(index), arguments: queueArguments))
            // Equal weights: every shard owns one bucket of the ring.
            operations.append(.bindQueue(queue(index), exchange: hashExchange, routingKey: "1"))
        }
        operations.append(.bindExchange(hashExchange, to: topology.inboundExchange, routingKey: "#"))
        return operations
    }

    static let missingPluginExplanation =
        "the ordered mode (--ordered-shards) needs RabbitMQ's consistent-hash exchange: enable the plugin with "
        + "`rabbitmq-plugins enable rabbitmq_consistent_hash_exchange` (bundled with RabbitMQ)"
}

extension Topology {
    /// The ordered mode's objects, nil in the default mode (`orderedShards` 0).
    public var sharded: ShardedTopology? {
        orderedShards > 0 ? ShardedTopology(topology: self, count: orderedShards) : nil
    }

    /// The queues the worker consumes: the work queue and, in the ordered mode, its shards.
    public var consumedQueueNames: Set<String> {
        var names: Set<String> = [workQueue]
        if let sharded {
            for index in 0..<sharded.count { names.insert(sharded.queue(index)) }
        }
        return names
    }
}

import AMQPTransport

/// One broker operation of the topology, as data: the declaration plan can be checked without a broker.
enum TopologyOperation: Sendable, Hashable {
    case declareExchange(String, type: String, arguments: AMQPTable)
    case declareQueue(String, arguments: AMQPTable)
    case bindQueue(String, exchange: String, routingKey: String)
    case unbindQueue(String, exchange: String, routingKey: String)
    case bindExchange(String, to: String, routingKey: String)

    func perform(on channel: AMQPChannel) async throws(AMQPError) {
        switch self {
        case .declareExchange(let name, let type, let arguments):
            try await channel.declareExchange(name, type: type, arguments: arguments)
        case .declareQueue(let name, let arguments):
            try await channel.declareQueue(name, arguments: arguments)
        case .bindQueue(let queue, let exchange, let routingKey):
            try await channel.bindQueue(queue, exchange: exchange, routingKey: routingKey)
        case .unbindQueue(let queue, let exchange, let routingKey):
            try await channel.unbindQueue(queue, exchange: exchange, routingKey: routingKey)
        case .bindExchange(let destination, let source, let routingKey):
            try await channel.bindExchange(destination, to: source, routingKey: routingKey)
        }
    }

    var declaresConsistentHashExchange: Bool {
        if case .declareExchange(_, ShardedTopology.exchangeType, _) = self { return true }
        return false
    }
}

/// Operations that succeed or fail together on one channel (a failure closes the channel).
struct TopologyStep: Sendable, Hashable {
    var operations: [TopologyOperation]
    /// The queue this step declares when the worker can consume without it (a retry queue, the dead-letter
    /// queue); nil for the essential step: exchanges and the consumed queues with their bindings.
    var secondaryQueue: String?
    /// A retry queue (the plain one or a shard's): a 406 on it in quorum mode gets the migration explanation.
    var isRetryQueue: Bool

    func perform(on channel: AMQPChannel) async throws(AMQPError) {
        for operation in operations {
            try await operation.perform(on: channel)
        }
    }

    /// The same step as the previous version declared it (its queues without the arguments added since: at-least-once
    /// dead-lettering, the dead-letter queue's loop and delivery limit), or nil when nothing differs. A queue that
    /// exists that way is accepted with a warning rather than stopping the worker (406) at the upgrade.
    var legacy: TopologyStep? {
        var changed = false
        var operations: [TopologyOperation] = []
        for operation in self.operations {
            guard case .declareQueue(let name, let arguments) = operation else {
                operations.append(operation)
                continue
            }
            var kept = arguments
            for key in TopologyStep.addedArguments(isDeadLetterQueue: secondaryQueue == name && !isRetryQueue) {
                kept[key] = nil
            }
            changed = changed || kept != arguments
            operations.append(.declareQueue(name, arguments: kept))
        }
        guard changed else { return nil }
        return TopologyStep(operations: operations, secondaryQueue: secondaryQueue, isRetryQueue: isRetryQueue)
    }

    /// The queue arguments this version added to what the previous one declared.
    static func addedArguments(isDeadLetterQueue: Bool) -> [String] {
        let everyQuorumQueue = ["x-dead-letter-strategy", "x-overflow"]
        return isDeadLetterQueue ? everyQuorumQueue + ["x-dead-letter-exchange", "x-delivery-limit"] : everyQuorumQueue
    }
}

/// What to do when a step fails.
enum TopologyFailureDecision: Sendable, Hashable {
    /// Reconnecting cannot fix it: stop the worker with this explanation (`TopologyError`).
    case stop(explanation: String)
    /// A secondary queue is unavailable now (404: its home node is down): warn and go on with a fresh channel.
    case skip
    /// Anything else: the session fails and the worker reconnects.
    case reconnect
}

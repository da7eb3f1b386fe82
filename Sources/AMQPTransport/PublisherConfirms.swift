/// Tracks publisher confirms by sequence number for one channel in confirm mode.
///
/// librabbitmq 0.11 has no confirm helper, so this is the bookkeeping RabbitMQ's docs describe: the n-th
/// publish after `confirm.select` has sequence number n; basic.ack/nack carry that number and may cover
/// every earlier one (`multiple`). A mandatory message that cannot be routed comes back as basic.return
/// *before* its basic.ack; a return carries no sequence number, so it is matched to the oldest unresolved
/// publish with the same exchange, routing key, body and properties (results and dead letters carry unique
/// message ids, so that is exact; fully identical messages are interchangeable). If the broker changed the
/// properties, the match falls back to exchange, routing key and body.
/// Pure bookkeeping: no C, no I/O, unit-tested on its own.
struct PublisherConfirms {
    struct Pending {
        var sequence: UInt64
        var batch: Int
        var index: Int
        var exchange: String
        var routingKey: String
        var body: [UInt8]
        var properties: AMQPMessageProperties
        var returned: (replyCode: UInt16, replyText: String)?
    }

    /// A resolved publish: which batch and position it belonged to, and the outcome.
    struct Resolution: Equatable {
        var batch: Int
        var index: Int
        var outcome: AMQPPublishOutcome
    }

    private(set) var nextSequence: UInt64 = 1
    /// Unresolved publishes in sequence order.
    private var pending: [Pending] = []

    var unresolvedCount: Int { pending.count }

    /// Records a publish and returns its sequence number.
    @discardableResult
    mutating func published(
        batch: Int, index: Int, exchange: String, routingKey: String, body: [UInt8],
        properties: AMQPMessageProperties = AMQPMessageProperties()
    ) -> UInt64 {
        let sequence = nextSequence
        nextSequence += 1
        pending.append(
            Pending(
                sequence: sequence, batch: batch, index: index, exchange: exchange, routingKey: routingKey, body: body,
                properties: properties
            ))
        return sequence
    }

    mutating func acknowledged(deliveryTag: UInt64, multiple: Bool) -> [Resolution] {
        resolve(deliveryTag: deliveryTag, multiple: multiple) { pending in
            if let returned = pending.returned {
                return .returned(replyCode: returned.replyCode, replyText: returned.replyText)
            }
            return .confirmed
        }
    }

    mutating func negativelyAcknowledged(deliveryTag: UInt64, multiple: Bool) -> [Resolution] {
        resolve(deliveryTag: deliveryTag, multiple: multiple) { _ in .nacked }
    }

    /// Notes a basic.return; the outcome is reported when its ack arrives.
    mutating func returned(
        exchange: String, routingKey: String, body: [UInt8],
        properties: AMQPMessageProperties = AMQPMessageProperties(),
        replyCode: UInt16, replyText: String
    ) {
        func sameContent(_ pending: Pending) -> Bool {
            pending.returned == nil && pending.exchange == exchange && pending.routingKey == routingKey
                && pending.body == body
        }
        let index =
            pending.firstIndex { sameContent($0) && $0.properties == properties }
            ?? pending.firstIndex(where: sameContent)
        if let index {
            pending[index].returned = (replyCode, replyText)
        }
    }

    /// Forgets every publish of `batch` (it timed out or failed as a whole).
    mutating func abandon(batch: Int) {
        pending.removeAll { $0.batch == batch }
    }

    private mutating func resolve(
        deliveryTag: UInt64, multiple: Bool, outcome: (Pending) -> AMQPPublishOutcome
    ) -> [Resolution] {
        if multiple {
            let end = pending.partitioningIndex { $0.sequence > deliveryTag }
            let resolved = pending[..<end].map { Resolution(batch: $0.batch, index: $0.index, outcome: outcome($0)) }
            pending.removeFirst(end)
            return resolved
        }
        let index = pending.partitioningIndex { $0.sequence >= deliveryTag }
        guard index < pending.count, pending[index].sequence == deliveryTag else { return [] }
        let resolution = Resolution(
            batch: pending[index].batch, index: pending[index].index, outcome: outcome(pending[index]))
        pending.remove(at: index)
        return [resolution]
    }
}

extension Array {
    /// The first index whose element satisfies `predicate`, for a predicate that is false then true along the array.
    fileprivate func partitioningIndex(where predicate: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if predicate(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

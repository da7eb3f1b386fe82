import AMQPTransport
import WalletWorker
import Foundation
import Logging

/// The dead-letter queue for `wallet-worker dead-letters`: each command walks the messages the queue holds when
/// it starts, once, holding them unacknowledged; it acknowledges (removes) only what it has dealt with (replayed
/// and confirmed, or purged), and everything else goes back to the queue, in its order, when the walk ends, also
/// when the command is interrupted or the connection is lost. So nothing is lost, and a replay that stops half-way
/// has replayed some messages and left the rest where they were.
public struct DeadLetterQueue: Sendable {
    public let connection: AMQPConnection
    public let queue: String

    public init(connection: AMQPConnection, queue: String) {
        self.connection = connection
        self.queue = queue
    }

    /// The configuration's dead-letter queue, on a connection of its own (closed by `close()`).
    public static func open(configuration: WorkerConfiguration, logger: Logger) async throws -> DeadLetterQueue {
        var connectionConfiguration = try configuration.toolConnectionConfiguration()
        connectionConfiguration.connectionName = "wallet-worker dead-letters"
        let connection = try await AMQPConnection.connect(configuration: connectionConfiguration, logger: logger)
        return DeadLetterQueue(connection: connection, queue: configuration.topology.deadLetterQueue)
    }

    public func close() async {
        await connection.close()
    }

    public struct BusyQueue: Error, CustomStringConvertible {
        public var queue: String
        public var consumers: UInt32
        public var description: String {
            "\(queue) has \(consumers) consumer(s): they would take messages this command is waiting for. Stop them "
                + "first (rabbitmqctl list_consumers shows them)"
        }
    }

    /// Calls `handle` with the queue's messages in batches, in queue order, and acknowledges the deliveries it
    /// returns. Ends after as many messages as the queue held at the start. Returns how many were seen.
    @discardableResult
    public func walk(_ handle: ([AMQPDelivery]) async throws -> [AMQPDelivery]) async throws -> Int {
        let channel = try await connection.openChannel()
        let status = try await channel.queueStatus(queue)
        guard status.consumerCount == 0 else { throw BusyQueue(queue: queue, consumers: status.consumerCount) }
        let total = Int(status.messageCount)
        guard total > 0 else {
            try? await channel.close()
            return 0
        }
        // Unlimited prefetch: every message stays unacknowledged until the walk ends, so the broker must send
        // them all.
        try await channel.setPrefetch(count: 0)
        let consumer = try await channel.consume(queue: queue)
        var seen = 0
        do {
            for try await batch in consumer {
                let wanted = Array(batch.prefix(total - seen))
                seen += wanted.count
                for delivery in try await handle(wanted) {
                    try await channel.ack(deliveryTag: delivery.deliveryTag)
                }
                if seen >= total { break }
            }
        } catch {
            // Closing the channel returns every unacknowledged message to the queue.
            try? await channel.close()
            throw error
        }
        try? await channel.cancel(consumerTag: consumer.tag)
        try? await channel.close()
        return seen
    }

    /// Removes every message (`queue.purge`); returns how many.
    public func purgeAll() async throws -> UInt32 {
        let channel = try await connection.openChannel()
        let purged = try await channel.purgeQueue(queue)
        try? await channel.close()
        return purged
    }
}

/// `dead-letters replay`: the selected dead letters back to the inbound exchange, each acknowledged only once
/// the broker confirmed its replay (a replay that was returned unroutable or nacked stays a dead letter).
public struct DeadLetterReplayer: Sendable {
    public var queue: DeadLetterQueue
    public var inboundExchange: String
    public var filter: DeadLetterFilter
    public var confirmTimeout: Duration = .seconds(30)

    public init(queue: DeadLetterQueue, inboundExchange: String, filter: DeadLetterFilter) {
        self.queue = queue
        self.inboundExchange = inboundExchange
        self.filter = filter
    }

    public struct Progress: Sendable, Hashable {
        public var seen = 0
        public var selected = 0
        public var replayed = 0
        /// Selected but not replayed: returned unroutable, nacked, or not confirmed in time; still dead letters.
        public var failed = 0
    }

    /// Replays (or with `dryRun`, only selects) the matching dead letters; `report` is called after every batch.
    public func run(
        dryRun: Bool, now: Date = Date(), report: (Progress, [DeadLetter]) -> Void
    ) async throws -> Progress {
        let publisher = try await queue.connection.openChannel()
        try await publisher.enableConfirms()
        var progress = Progress()
        try await queue.walk { batch in
            progress.seen += batch.count
            let selected = batch.filter { filter.matches(DeadLetter($0), at: now) }
            progress.selected += selected.count
            guard !dryRun, !selected.isEmpty else {
                report(progress, selected.map(DeadLetter.init))
                return []
            }
            let outcomes = try await publisher.publish(
                selected.map { DeadLetterReplay.message(for: $0, inboundExchange: inboundExchange) },
                confirmTimeout: confirmTimeout)
            var replayed: [AMQPDelivery] = []
            for (delivery, outcome) in zip(selected, outcomes) {
                if outcome.isConfirmed { replayed.append(delivery) }
            }
            progress.replayed += replayed.count
            progress.failed += selected.count - replayed.count
            report(progress, replayed.map(DeadLetter.init))
            return replayed
        }
        try? await publisher.close()
        return progress
    }
}

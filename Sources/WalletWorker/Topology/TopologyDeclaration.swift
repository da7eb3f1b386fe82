import AMQPTransport
import Logging

/// `wallet-worker declare`: declares CONTRACT.md §1's topology once and exits (for deploy jobs).
public enum TopologyDeclaration {
    /// Declares everything it can. A queue the broker cannot declare now (its home node is down) does not stop
    /// the others, but the command then fails naming it: a deploy job should not report a topology it did not
    /// finish (the worker itself goes on without such a queue and declares it again at its next reconnect).
    public static func declare(configuration: WorkerConfiguration, logger: Logger) async throws {
        try configuration.validate()
        var connectionConfiguration = try configuration.connectionConfiguration()
        connectionConfiguration.connectionName = "wallet-worker declare"
        let connection = try await AMQPConnection.connect(configuration: connectionConfiguration, logger: logger)
        let skipped: [String]
        do {
            skipped = try await configuration.topology.declare(
                on: connection, retry: configuration.retrySchedule, logger: logger)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        guard skipped.isEmpty else { throw Incomplete(queues: skipped) }
        logger.info(
            "topology declared",
            metadata: [
                "work_queue": "\(configuration.topology.workQueue)",
                "ordered_shards": "\(configuration.topology.orderedShards)",
            ])
    }

    /// Some secondary queues could not be declared (the broker answered 404: their home node is down).
    public struct Incomplete: Error, CustomStringConvertible {
        public var queues: [String]

        public var description: String {
            "the topology is incomplete: the broker could not declare \(queues.joined(separator: ", ")) (404 "
                + "NOT_FOUND: a node holding it is down); everything else is declared. Run `declare` again once the "
                + "node is back"
        }
    }
}

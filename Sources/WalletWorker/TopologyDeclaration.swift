import AMQPTransport
import Logging

/// `wallet-worker declare`: declares CONTRACT.md §1's topology once and exits (for deploy jobs).
public enum TopologyDeclaration {
    public static func declare(configuration: WorkerConfiguration, logger: Logger) async throws {
        try configuration.validate()
        var connectionConfiguration = try configuration.connectionConfiguration()
        connectionConfiguration.connectionName = "wallet-worker declare"
        let connection = try await AMQPConnection.connect(configuration: connectionConfiguration, logger: logger)
        do {
            let channel = try await connection.openChannel()
            try await configuration.topology.declare(on: channel, retryDelay: configuration.retryDelay)
            try await channel.close()
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        logger.info("topology declared", metadata: [
            "work_queue": "\(configuration.topology.workQueue)",
            "ordered_shards": "\(configuration.topology.orderedShards)",
        ])
    }
}

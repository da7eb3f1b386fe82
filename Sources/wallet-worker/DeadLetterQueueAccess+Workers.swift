import AMQPTransport
import WalletOperatorTools
import WalletWorker

/// The dead-letter queue is of the other type than the settings say (406 on its declaration, and the other type's
/// declaration, a no-op on a queue that has exactly those arguments, passes): the flag to pass, exactly.
struct OtherQueueType: Error, CustomStringConvertible {
    var queue: String
    var actual: Topology.QueueType
    var description: String {
        "\(queue) is a \(actual.rawValue) queue, and the settings say \(actual == .quorum ? "classic" : "quorum"): "
            + "pass --queue-type \(actual.rawValue) (or WALLET_QUEUE_TYPE=\(actual.rawValue)), as the workers run"
    }
}

extension DeadLetterQueueAccess {
    /// The dead-letter queue of the workers that run with `configuration`, declared as they declare it. When the
    /// broker refuses the declaration with other arguments (406) and the other queue type's passes, the queue is that
    /// type: said as `OtherQueueType`, never as a guess among arguments.
    init(workers configuration: WorkerConfiguration) throws {
        let topology = configuration.topology
        try self.init(connection: configuration.connectionConfiguration(), queue: topology.deadLetterQueue) {
            connection in
            do {
                return try await topology.declareDeadLetterQueue(on: connection)
            } catch let error as TopologyError where error.underlying.replyCode == 406 {
                var other = topology
                other.workQueueType = other.workQueueType == .quorum ? .classic : .quorum
                guard (try? await other.declareDeadLetterQueue(on: connection)) != nil else { throw error }
                throw OtherQueueType(queue: topology.deadLetterQueue, actual: other.workQueueType)
            }
        }
    }
}

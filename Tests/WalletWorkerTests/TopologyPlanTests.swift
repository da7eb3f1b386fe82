import AMQPTransport
import Testing

@testable import WalletWorker

/// Node loss (issue 13): what the worker declares in quorum mode, and which failures it consumes past.
@Suite struct TopologyPlanTests {
    func quorum() -> Topology {
        var topology = Topology()
        topology.workQueueType = .quorum
        return topology
    }

    func declaredQueues(_ plan: [TopologyStep]) -> [String: AMQPTable] {
        var queues: [String: AMQPTable] = [:]
        for step in plan {
            for case .declareQueue(let name, let arguments) in step.operations { queues[name] = arguments }
        }
        return queues
    }

    @Test func inQuorumModeEveryQueueIsQuorumTheRetryQueueToo() {
        let topology = quorum()
        let queues = declaredQueues(topology.declarationPlan(retryDelay: .seconds(5)))
        #expect(Set(queues.keys) == [topology.workQueue, topology.retryQueue, topology.deadLetterQueue])
        for (name, arguments) in queues {
            #expect(arguments["x-queue-type"] == .string("quorum"), "\(name)")
        }
        #expect(queues[topology.retryQueue]?["x-message-ttl"] == .int64(5_000))
    }

    @Test func inQuorumModeTheShardsRetryQueuesAreQuorumToo() throws {
        var topology = quorum()
        topology.orderedShards = 3
        let sharded = try #require(topology.sharded)
        let queues = declaredQueues(topology.declarationPlan(retryDelay: .seconds(5)))
        for index in 0..<3 {
            #expect(queues[sharded.retryQueue(index)]?["x-queue-type"] == .string("quorum"))
            #expect(queues[sharded.retryQueue(index)]?["x-dead-letter-routing-key"] == .string(sharded.queue(index)))
        }
    }

    @Test func theClassicModeDeclaresWhatItAlwaysDid() {
        let topology = Topology()
        let queues = declaredQueues(topology.declarationPlan(retryDelay: .seconds(5)))
        #expect(queues[topology.retryQueue]?["x-queue-type"] == nil)
        #expect(queues[topology.workQueue]?["x-queue-type"] == nil)
    }

    @Test func theEssentialStepComesFirstThenOneStepPerSecondaryQueue() {
        let topology = Topology()
        let plan = topology.declarationPlan(retryDelay: .seconds(5))
        #expect(plan.first?.secondaryQueue == nil)
        #expect(plan.dropFirst().map(\.secondaryQueue) == [topology.retryQueue, topology.deadLetterQueue])
    }

    @Test func aSecondaryQueueWhoseNodeIsDownIsSkippedTheWorkQueueIsNot() {
        let topology = quorum()
        let plan = topology.declarationPlan(retryDelay: .seconds(5))
        #expect(topology.failureDecision(step: plan[1], replyCode: 404) == .skip)
        #expect(topology.failureDecision(step: plan[0], replyCode: 404) == .reconnect)
        #expect(topology.failureDecision(step: plan[1], replyCode: nil) == .reconnect)
        guard case .stop(let explanation) = topology.failureDecision(step: plan[1], replyCode: 406) else {
            Issue.record("a 406 on the retry queue must stop the worker")
            return
        }
        #expect(explanation.contains("--retry-queue"), "the migration from a classic retry queue is explained")
    }
}

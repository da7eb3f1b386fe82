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
        let queues = declaredQueues(topology.declarationPlan(retry: .attempts(5)))
        let retryLevels = ["", ".2", ".3", ".4"].map { topology.retryQueue + $0 }
        #expect(Set(queues.keys) == Set([topology.workQueue, topology.deadLetterQueue] + retryLevels))
        for (name, arguments) in queues {
            #expect(arguments["x-queue-type"] == .string("quorum"), "\(name)")
        }
        #expect(retryLevels.map { queues[$0]?["x-message-ttl"] } == [.int64(5_000), .int64(10_000), .int64(20_000), .int64(40_000)])
    }

    @Test func inQuorumModeTheShardsRetryQueuesAreQuorumToo() throws {
        var topology = quorum()
        topology.orderedShards = 3
        let sharded = try #require(topology.sharded)
        let queues = declaredQueues(topology.declarationPlan(retry: .attempts(5)))
        for index in 0..<3 {
            for level in 1...4 {
                let retryQueue = RetrySchedule.queue(sharded.retryQueue(index), level: level)
                #expect(queues[retryQueue]?["x-queue-type"] == .string("quorum"))
                #expect(queues[retryQueue]?["x-dead-letter-routing-key"] == .string(sharded.queue(index)))
            }
        }
    }

    @Test func theClassicModeDeclaresWhatItAlwaysDid() {
        let topology = Topology()
        let queues = declaredQueues(topology.declarationPlan(retry: .attempts(5)))
        #expect(queues[topology.retryQueue]?["x-queue-type"] == nil)
        #expect(queues[topology.workQueue]?["x-queue-type"] == nil)
    }

    @Test func theEssentialStepComesFirstThenOneStepPerSecondaryQueue() {
        let topology = Topology()
        let plan = topology.declarationPlan(retry: .attempts(5))
        #expect(plan.first?.secondaryQueue == nil)
        let retryLevels = ["", ".2", ".3", ".4"].map { topology.retryQueue + $0 }
        #expect(plan.dropFirst().map(\.secondaryQueue) == retryLevels + [topology.deadLetterQueue])
    }

    @Test func aSecondaryQueueWhoseNodeIsDownIsSkippedTheWorkQueueIsNot() {
        let topology = quorum()
        let plan = topology.declarationPlan(retry: .attempts(5))
        #expect(topology.failureDecision(step: plan[1], replyCode: 404) == .skip)
        #expect(topology.failureDecision(step: plan[0], replyCode: 404) == .reconnect)
        #expect(topology.failureDecision(step: plan[1], replyCode: nil) == .reconnect)
        guard case .stop(let explanation) = topology.failureDecision(step: plan[1], replyCode: 406) else {
            Issue.record("a 406 on the retry queue must stop the worker")
            return
        }
        #expect(explanation.contains("--retry-queue"), "the migration from a classic retry queue is explained")
    }

    @Test func aUserWithoutConfigureRightsIsToldAboutNoDeclare() {
        let topology = Topology()
        let plan = topology.declarationPlan(retry: .attempts(5))
        for step in [plan[0], plan[1]] {
            guard case .stop(let explanation) = topology.failureDecision(step: step, replyCode: 403) else {
                Issue.record("a 403 must stop the worker: reconnecting does not grant the permission")
                continue
            }
            #expect(explanation.contains("--no-declare"))
        }
    }
}

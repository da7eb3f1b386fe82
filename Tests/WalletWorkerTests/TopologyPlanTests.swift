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
        #expect(
            retryLevels.map { queues[$0]?["x-message-ttl"] } == [
                .int64(5_000), .int64(10_000), .int64(20_000), .int64(40_000),
            ])
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

    /// Issue 24, items 4 and 9: the dead-letter queue looks at itself through a loop (its own dead-letter
    /// exchange, bound to it alone) so a rejected look goes back to its tail, with a delivery limit RabbitMQ 4
    /// never reaches; every quorum queue dead-letters at least once. On main the dead-letter queue is declared
    /// with neither.
    @Test func theDeadLetterQueueHasItsLoopAndQuorumQueuesDeadLetterAtLeastOnce() {
        let topology = quorum()
        let plan = topology.declarationPlan(retry: .attempts(3))
        let queues = declaredQueues(plan)
        let dead = queues[topology.deadLetterQueue]
        #expect(dead?["x-dead-letter-exchange"] == .string(topology.deadLetterLoopExchange))
        #expect(dead?["x-delivery-limit"] == .int64(Topology.deadLetterQueueDeliveryLimit))
        for (name, arguments) in queues where name != topology.deadLetterQueue {
            #expect(arguments["x-dead-letter-strategy"] == .string("at-least-once"), "\(name)")
            #expect(arguments["x-overflow"] == .string("reject-publish"), "\(name)")
        }
        // Its loop dead-letters into itself: at-most-once (RabbitMQ 3.10's at-least-once worker stalls on that).
        #expect(dead?["x-dead-letter-strategy"] == nil)
        let operations = plan.flatMap(\.operations)
        #expect(operations.contains(.declareExchange(topology.deadLetterLoopExchange, type: "fanout", arguments: [:])))
        #expect(
            operations.contains(
                .bindQueue(topology.deadLetterQueue, exchange: topology.deadLetterLoopExchange, routingKey: "")))

        let classic = Topology()
        let classicQueues = declaredQueues(classic.declarationPlan(retry: .attempts(3)))
        #expect(
            classicQueues[classic.deadLetterQueue] == [
                "x-dead-letter-exchange": .string(classic.deadLetterLoopExchange)
            ])
        #expect(classicQueues[classic.workQueue]?["x-dead-letter-strategy"] == nil, "classic queues have no strategy")
    }

    /// A queue an earlier version declared is accepted as it was (a warning), not a 406 that stops the upgrade.
    @Test func aStepsLegacyFormIsTheEarlierVersionsArguments() throws {
        let topology = quorum()
        let plan = topology.declarationPlan(retry: .attempts(2))
        let legacyWork = try #require(plan[0].legacy)
        #expect(
            declaredQueues([legacyWork])[topology.workQueue] == [
                "x-dead-letter-exchange": .string(topology.deadLetterExchange), "x-queue-type": .string("quorum"),
                "x-delivery-limit": .int64(20),
            ])
        let legacyDead = try #require(plan.last?.legacy)
        #expect(declaredQueues([legacyDead])[topology.deadLetterQueue] == ["x-queue-type": .string("quorum")])
        #expect(Topology().declarationPlan(retry: .attempts(2))[0].legacy == nil, "a classic work queue did not change")
    }
}

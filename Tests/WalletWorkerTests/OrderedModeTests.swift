import AMQPTransport
import Testing

@testable import WalletWorker

/// The ordered mode's plan without a broker: names, arguments, which queue each pipeline consumes and where its
/// retries go, and the hand-over on stop.
@Suite struct OrderedModeTests {
    @Test func offByDefault() {
        let configuration = WorkerConfiguration()
        #expect(configuration.topology.orderedShards == 0)
        #expect(configuration.topology.sharded == nil)
    }

    @Test func defaultModeConsumesTheWorkQueueWithEveryPipeline() {
        var configuration = WorkerConfiguration()
        configuration.concurrency = 3
        let queues = configuration.consumedQueues
        #expect(queues.count == 3)
        #expect(
            queues.allSatisfy {
                $0
                    == ConsumedQueue(
                        name: "wallet.notifications.work", retryQueue: "wallet.notifications.retry", isShard: false)
            })
    }

    @Test func orderedModeConsumesEveryShardAndTheWorkQueueWhateverTheConcurrency() {
        var configuration = WorkerConfiguration()
        configuration.concurrency = 5
        configuration.topology.orderedShards = 3
        #expect(
            configuration.consumedQueues == [
                ConsumedQueue(
                    name: "wallet.notifications.work.shard.0", retryQueue: "wallet.notifications.retry.shard.0",
                    isShard: true),
                ConsumedQueue(
                    name: "wallet.notifications.work.shard.1", retryQueue: "wallet.notifications.retry.shard.1",
                    isShard: true),
                ConsumedQueue(
                    name: "wallet.notifications.work.shard.2", retryQueue: "wallet.notifications.retry.shard.2",
                    isShard: true),
                ConsumedQueue(
                    name: "wallet.notifications.work", retryQueue: "wallet.notifications.retry", isShard: false),
            ])
    }

    @Test func namesFollowTheConfiguredTopology() throws {
        var topology = Topology()
        topology.inboundExchange = "in"
        topology.workQueue = "work"
        topology.retryQueue = "retry"
        topology.orderedShards = 2
        let sharded = try #require(topology.sharded)
        #expect(sharded.hashExchange == "in.ordered")
        #expect(sharded.queues == ["work.shard.0", "work.shard.1"])
        #expect(sharded.retryQueues == ["retry.shard.0", "retry.shard.1"])
        #expect(sharded.hashExchangeArguments == ["hash-header": .string("digitalCardId")])
    }

    @Test func shardsHaveTheWorkQueuesDeadLetteringAndASingleActiveConsumer() throws {
        var topology = Topology()
        topology.orderedShards = 1
        #expect(
            try #require(topology.sharded).queueArguments == [
                "x-dead-letter-exchange": .string("wallet.notifications.dlx"),
                "x-single-active-consumer": .bool(true),
            ])
        topology.workQueueType = .quorum
        topology.deliveryLimit = 7
        #expect(
            try #require(topology.sharded).queueArguments == [
                "x-dead-letter-exchange": .string("wallet.notifications.dlx"),
                "x-queue-type": .string("quorum"),
                "x-delivery-limit": .int64(7),
                "x-dead-letter-strategy": .string("at-least-once"),
                "x-overflow": .string("reject-publish"),
                "x-single-active-consumer": .bool(true),
            ])
    }

    @Test func aShardsRetryQueueDeadLettersBackToThatShard() throws {
        var topology = Topology()
        topology.orderedShards = 4
        let sharded = try #require(topology.sharded)
        #expect(
            sharded.retryQueueArguments(2, retryDelay: .milliseconds(1500)) == [
                "x-message-ttl": .int64(1500),
                "x-dead-letter-exchange": .string(""),
                "x-dead-letter-routing-key": .string("wallet.notifications.work.shard.2"),
            ])
    }
}

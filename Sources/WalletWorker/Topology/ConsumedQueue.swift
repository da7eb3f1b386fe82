/// What one pipeline consumes, and where its transient failures wait before they are tried again.
struct ConsumedQueue: Sendable, Hashable {
    var name: String
    /// The queue whose TTL dead-letters a retried message back to `name`.
    var retryQueue: String
    /// A shard of the ordered mode: a single-active-consumer queue, stopped by handing over (`ShardHandover`).
    var isShard: Bool
}

extension WorkerConfiguration {
    /// One entry per pipeline.
    ///
    /// Default mode: `concurrency` pipelines on the work queue. Ordered mode: one pipeline per shard, and one on the
    /// work queue, which the inbound exchange no longer feeds but which may still hold messages published before
    /// the switch (and receives their retries); `concurrency` does not apply.
    var consumedQueues: [ConsumedQueue] {
        let workQueue = ConsumedQueue(name: topology.workQueue, retryQueue: topology.retryQueue, isShard: false)
        guard let sharded = topology.sharded else {
            return Array(repeating: workQueue, count: concurrency)
        }
        let shards = (0..<sharded.count).map {
            ConsumedQueue(name: sharded.queue($0), retryQueue: sharded.retryQueue($0), isShard: true)
        }
        return shards + [workQueue]
    }
}

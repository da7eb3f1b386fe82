// Issue 36, CONTRACT.md §10: under a black hole that froze the worker's connections with deliveries in hand while new
// connections still passed, the worker noticed the missed heartbeats, reconnected in 226 ms and consumed at once,
// while the broker still held the old consumer's deliveries: later messages were processed before earlier ones (76
// and 7 per-card inversions in two runs). Now a session that follows a failed one consumes only once the broker has
// dropped the old consumer (`ConsumerRelease`). The decisions are `ConsumerReleaseTests`,
// `DeliveryLifecycleConsumerReleaseTests` and `ExecutorConsumerReleaseTests`; this is the one end-to-end test.
import AMQPTransport
import BrokerTestSupport
import Foundation
import Synchronization
import TestSupport
import Testing
import WalletWorker

extension LongRuns {
    @Suite("Queue order across reconnects (a black hole on the worker's connections)", .timeLimit(.minutes(3)))
    struct ReconnectOrderTests {
        static let cards = 10

        @Test(
            "connections frozen twice with deliveries in hand while new ones pass: no per-card processing-order inversion, nothing lost (the work queue; the ordered mode's shards)",
            arguments: [0, 2])
        func aBlackHoleDoesNotReorderTheQueue(shards: Int) async throws {
            let broker = try AMQPURL(parsing: TestBroker.urlText)
            let relay = try FaultyRelay(upstreamHost: "127.0.0.1", upstreamPort: broker.port)
            defer { relay.close() }
            let ordered = shards > 0 ? ["--ordered-shards", "\(shards)"] : []
            let purpose = shards > 0 ? "reconnect-order-shards" : "reconnect-order"
            try await withResilienceTopology(purpose, declareFlags: ordered) { topology, connection, channel in
                let sharded = ShardedTopologyNames(topology, shards: shards)
                let url = "amqp://\(broker.user):\(broker.password)@127.0.0.1:\(relay.port)/%2f"
                // Heartbeats every 2 s: each side gives the other up after about two missed ones.
                let worker = try await startReadyWorker(
                    workerRunArguments(
                        topology, store: "memory", prefetch: 50, extra: ["--heartbeat", "2s"] + ordered),
                    amqpURL: url, label: "\(purpose)-worker"
                ).worker
                // One pipeline on the work queue, and one per shard in the ordered mode.
                let pipelines = 1 + shards
                let consumed = [topology.work] + (0..<shards).map { "\(topology.work).shard.\($0)" }
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                // A steady stream, round robin over the cards, kept at most 200 messages ahead of the results: however
                // fast the worker goes, deliveries are in hand at each freeze and a backlog waits behind them.
                let published = Atomic<Int>(0)
                let publishing = Atomic<Bool>(true)
                let publisher = Task {
                    var sequence = 0
                    while publishing.load(ordering: .relaxed) {
                        try await waitUntil("the results to catch up with the stream") {
                            guard publishing.load(ordering: .relaxed) else { return true }
                            return try await readyCount(topology.capture, on: connection) >= sequence - 200
                        }
                        let chunk = (sequence..<sequence + 20).map { n in
                            var spec = InboundSpec.action(
                                "order-\(n % Self.cards)-\(n / Self.cards)", action: "order.refresh")
                            // The ordered mode hashes the card header to a shard.
                            spec.headers = [(ShardedTopology.cardHeader, .string("ORDER-\(n % Self.cards)"))]
                            return spec.outbound(to: topology.inbound)
                        }
                        try await publishConfirmed(chunk, on: channel)
                        sequence += chunk.count
                        published.store(sequence, ordering: .relaxed)
                    }
                }
                do {
                    for round in 1...2 {
                        try await waitUntil("results flowing before freeze \(round)", every: .milliseconds(100)) {
                            try await readyCount(topology.capture, on: connection) > 200 * round
                        }
                        relay.freezeExisting()
                        // The worker gives the frozen session up and opens the next through the relay.
                        try await waitUntil("session \(round + 1) consuming\n\(worker.logTail())") {
                            jsonObjects(worker.log).count { $0["message"] as? String == "consuming" }
                                >= pipelines * (round + 1)
                        }
                        // Frozen until the broker drops the old consumers by itself (its heartbeat detection): one
                        // consumer left on each queue the worker consumes. Then the dead connections go.
                        try await waitUntil("the broker to drop the frozen consumers\n\(worker.logTail())") {
                            try await consumerCounts(consumed, on: connection).allSatisfy { $0 == 1 }
                        }
                        relay.severFrozen()
                    }
                } catch {
                    publisher.cancel()
                    throw error
                }
                publishing.store(false, ordering: .relaxed)
                try await publisher.value
                let total = published.load(ordering: .relaxed)

                try await waitUntil("every result\n\(worker.logTail())", every: .milliseconds(200)) {
                    try await readyCount(topology.capture, on: connection) >= total
                }
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                var firstSeen = Set<String>()
                var highest = [Int: Int]()
                var inversions: [String] = []
                for id in results.compactMap(\.properties.messageID) {
                    // A replay (a delivery processed, then redelivered with the session) republishes a result seen
                    // before: at least once. Order is about each message's first processing.
                    guard firstSeen.insert(id).inserted else { continue }
                    let parts = id.split(separator: "/")[0].split(separator: "-")
                    guard parts.count == 3, let card = Int(parts[1]), let sequence = Int(parts[2]) else { continue }
                    if let last = highest[card], sequence < last { inversions.append(id) }
                    highest[card] = max(highest[card] ?? -1, sequence)
                }
                let expected = Set((0..<total).map { "order-\($0 % Self.cards)-\($0 / Self.cards)/0" })
                #expect(firstSeen == expected, "lost: \(expected.subtracting(firstSeen).sorted().prefix(10))")
                #expect(inversions.isEmpty, "\(inversions.count) inversions: \(inversions.prefix(10))")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                let waits =
                    worker.log.components(separatedBy: "waiting for the broker to drop the last session")
                    .count - 1
                print(
                    "reconnect order (\(shards) shards): \(total) messages, \(results.count) results (\(results.count - firstSeen.count) replayed), "
                        + "\(inversions.count) inversions, \(waits) waits for the broker to drop a consumer")
                worker.kill()
                await sharded.delete()
            }
        }
    }
}

/// The ordered mode's shard queues, their retry queues and the hash exchange of a `ResilienceTopology`, which
/// `withResilienceTopology` does not own: deleted at the end of the test (the run's private broker goes with its
/// data directory should the test fail first).
private struct ShardedTopologyNames {
    var queues: [String] = []
    var exchanges: [String] = []

    init(_ topology: ResilienceTopology, shards: Int) {
        guard shards > 0 else { return }
        queues = (0..<shards).flatMap { ["\(topology.work).shard.\($0)", "\(topology.retry).shard.\($0)"] }
        exchanges = ["\(topology.inbound).ordered"]
    }

    func delete() async {
        try? await deleteTopology(queues: queues, exchanges: exchanges, purpose: "clean-up shards")
    }
}

/// The consumers of each of `queues` now (passive declares on one channel).
private func consumerCounts(_ queues: [String], on connection: AMQPConnection) async throws -> [Int] {
    let channel = try await connection.openChannel()
    var counts: [Int] = []
    for queue in queues { counts.append(Int(try await channel.queueStatus(queue).consumerCount)) }
    try? await channel.close()
    return counts
}

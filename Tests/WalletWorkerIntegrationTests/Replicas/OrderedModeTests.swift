// The ordered mode (`--ordered-shards`, CONTRACT.md §10) against the real broker: the consistent-hash topology,
// per-card order with two workers on single-active-consumer shards, the hand-over to the standby, and retries
// that come back to their own shard.
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletRouting
import WalletStore
import WalletWorker

/// CPS sequences whose results show the order they were processed in: `install`, then `suspend`/`resume`
/// alternating. Processed out of order, a step would not change the state (`changed: false`) or be refused
/// (`errorEncountered`); and every result names its inbound message (`<card>#<step>/<n>`).
private struct CardSequences {
    var cards: [String]
    var steps: Int

    func code(step: Int) -> String {
        if step == 0 { return "CBP.info.tokenProvisioned" }
        return step % 2 == 1 ? "CBP.info.tokenSuspended" : "CBP.info.tokenResumed"
    }

    func message(card: String, step: Int) -> InboundSpec {
        let body =
            #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessage":{"code":"\#(code(step: step))","text":"\#(card) step \#(step)","severity":"info","params":[]}}"#
        var spec = InboundSpec(json: body, messageID: "\(card)#\(step)")
        spec.headers = [(ShardedTopology.cardHeader, .string(card))]
        return spec
    }

    /// Steps `range` of every card, interleaved across cards as a backend would send them.
    func messages(steps range: Range<Int>) -> [InboundSpec] {
        range.flatMap { step in cards.map { message(card: $0, step: step) } }
    }

    var messageCount: Int { cards.count * steps }
    /// Each step publishes a `serverMessage` event and a `completed` event.
    var resultCount: Int { messageCount * 2 }

    /// What is wrong with the results: each card's results in publication order, each exactly once, every step a
    /// state change.
    func problems(in results: [CapturedMessage]) -> [String] {
        var problems: [String] = []
        var idsByCard: [String: [String]] = [:]
        var seen = Set<String>()
        for result in results {
            let id = result.properties.messageID ?? ""
            if !seen.insert(id).inserted { problems.append("result \(id) arrived twice") }
            guard let card = result.string("digitalCardId") else {
                problems.append("a result without digitalCardId: \(result.summary)")
                continue
            }
            idsByCard[card, default: []].append(id)
            if result.string("event") == "errorEncountered" { problems.append("\(id) refused: \(result.summary)") }
            if result.string("event") == "serverMessage", result.json?["changed"]?.boolValue != true {
                problems.append("\(id) did not change the state (processed out of order?): \(result.summary)")
            }
        }
        for card in cards {
            let expected = (0..<steps).flatMap { ["\(card)#\($0)/0", "\(card)#\($0)/1"] }
            let actual = idsByCard[card] ?? []
            if actual != expected {
                let firstDifference =
                    zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(actual.count, expected.count)
                problems.append(
                    "\(card): \(actual.count) results, out of order or missing from index \(firstDifference): "
                        + "got \(actual[firstDifference...].prefix(4)), expected \(expected[firstDifference...].prefix(4))"
                )
            }
        }
        return problems
    }
}

/// The shard queues' ready messages.
private func readyCounts(_ queues: [String], _ environment: WorkerEnvironment) async throws -> [UInt32] {
    var counts: [UInt32] = []
    for queue in queues { counts.append(try await environment.messageCount(queue)) }
    return counts
}

/// The broker's reply code when `body` is refused on a channel of its own (a refusal closes the channel).
private func replyCode(
    _ environment: WorkerEnvironment, _ body: (AMQPChannel) async throws -> Void
) async throws -> UInt16? {
    let channel = try await environment.connection.openChannel()
    do {
        try await body(channel)
    } catch {
        guard let refused = error as? AMQPError else { throw error }
        return refused.replyCode ?? 0
    }
    try? await channel.close()
    return nil
}

/// Messages the worker has routed (`wallet_messages_total`, every sender and outcome).
private func processed(_ worker: RunningWorker) -> Int {
    Int(worker.metric("wallet_messages_total"))
}

/// A SQLite file both workers of a test share, as replicas share their store. Created (and migrated) before
/// the workers start: two stores migrating a new file at the same moment can fail ("no such table:
/// grdb_migrations"), which is not what these tests are about.
private func withSharedStore(_ body: (String) async throws -> Void) async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("wnw-ordered-\(UInt64.random(in: 0...UInt64.max))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let path = directory.appendingPathComponent("wallet.sqlite").path
    await (try WalletStores.open(.sqlite(path: path))).close()
    try await body(path)
}

@Suite("Ordered mode: consistent-hash shards with a single active consumer", .timeLimit(.minutes(5)))
struct OrderedModeTests {
    static let shards = 4

    @Test(
        "the topology is declared as described, idempotently, and hashes each card to one shard",
        arguments: Topology.QueueType.allCases)
    func topology(queueType: Topology.QueueType) async throws {
        try await withWorkerEnvironment(
            "ordered-topology",
            configure: {
                $0.topology.workQueueType = queueType
            }
        ) { environment in
            // A deployment switching on the ordered mode: the default mode bound the work queue before.
            try await environment.declareTopology()
            environment.configuration.topology.orderedShards = Self.shards
            try await environment.declareTopology()
            try await environment.declareTopology()
            let topology = environment.topology
            let sharded = try #require(topology.sharded)

            // Declared with these arguments: the same are accepted again, others refused (406).
            for index in 0..<Self.shards {
                #expect(
                    try await replyCode(environment) {
                        try await $0.declareQueue(sharded.queue(index), arguments: sharded.queueArguments)
                        try await $0.declareQueue(
                            sharded.retryQueue(index),
                            arguments: sharded.retryQueueArguments(index, retryDelay: .seconds(5)))
                    } == nil)
            }
            var withoutSingleActiveConsumer = sharded.queueArguments
            withoutSingleActiveConsumer["x-single-active-consumer"] = nil
            #expect(
                try await replyCode(environment) {
                    try await $0.declareQueue(sharded.queue(0), arguments: withoutSingleActiveConsumer)
                } == 406)
            #expect(
                try await replyCode(environment) {
                    try await $0.declareExchange(
                        sharded.hashExchange, type: ShardedTopology.exchangeType,
                        arguments: sharded.hashExchangeArguments)
                } == nil)
            #expect(
                try await replyCode(environment) {
                    try await $0.declareExchange(sharded.hashExchange, type: "topic")
                } == 406)

            // Each card's messages land in one shard, whatever their routing key; the cards spread over every
            // shard; the work queue, unbound, gets nothing.
            var shardOfCard: [String: Int] = [:]
            for number in 0..<40 {
                let card = "DC-\(number)"
                let before = try await readyCounts(sharded.queues, environment)
                try await environment.publish(
                    (0..<3).map { step in
                        var spec = CardSequences(cards: [card], steps: 3).message(card: card, step: step)
                        spec.routingKey = "wallet.notification.\(step)"
                        return spec
                    })
                let grown = zip(before, try await readyCounts(sharded.queues, environment)).enumerated()
                    .filter { $0.element.1 != $0.element.0 }
                #expect(
                    grown.count == 1 && grown.first.map { $0.element.1 - $0.element.0 } == 3,
                    "\(card)'s 3 messages went to shards \(grown)")
                shardOfCard[card] = grown.first?.offset
            }
            #expect(
                Set(shardOfCard.values) == Set(0..<Self.shards), "40 cards over \(Self.shards) shards: \(shardOfCard)")
            #expect(try await environment.messageCount(topology.workQueue) == 0)

            // Without the header (installations, bodies without a card, publishers that forgot it): one shard.
            let before = try await readyCounts(sharded.queues, environment)
            try await environment.publish([
                InboundSpec(
                    json: #"{"installationId":"i-1","platform":"fcm","pushChannel":"t"}"#, messageID: "n-1",
                    type: "DeviceInstallation"),
                InboundSpec(json: #"{"action":"refresh"}"#, messageID: "n-2"),
                InboundSpec(json: #"{"sender":"CPS","digitalCardId":"DC-1"}"#, messageID: "n-3"),
                InboundSpec(body: Array("not json".utf8), messageID: "n-4"),
            ])
            let grown = zip(before, try await readyCounts(sharded.queues, environment)).filter { $0.1 != $0.0 }
            #expect(grown.count == 1 && grown.first.map { $0.1 - $0.0 } == 4, "messages without the header: \(grown)")

            // Another replica declaring again keeps the ring: a card stays in its shard, nothing is routed twice.
            try await environment.declareTopology()
            for number in 0..<10 {
                let card = "DC-\(number)"
                let before = try await readyCounts(sharded.queues, environment)
                try await environment.publish(CardSequences(cards: [card], steps: 1).message(card: card, step: 0))
                let after = try await readyCounts(sharded.queues, environment)
                #expect(
                    zip(before, after).enumerated().filter { $0.element.1 != $0.element.0 }.map(\.offset)
                        == [shardOfCard[card]].compactMap { $0 }, "\(card) after declaring again")
            }
            let total = try await readyCounts(sharded.queues, environment).reduce(0, +)
            #expect(total == 40 * 3 + 4 + 10)
            #expect(try await environment.messageCount(topology.workQueue) == 0)
        }
    }

    @Test("two workers: each card's results in publication order, every message processed once")
    func orderWithTwoWorkers() async throws {
        try await withSharedStore { path in
            try await withWorkerEnvironment(
                "ordered-two",
                configure: {
                    $0.topology.orderedShards = Self.shards
                    $0.store = .sqlite(path: path)
                    // Small batches: many of them, so two active consumers on a shard would interleave.
                    $0.prefetch = 3
                }
            ) { environment in
                let sequences = CardSequences(cards: (0..<24).map { "DC-\($0)" }, steps: 11)
                let capture = try await environment.resultCapture()
                async let first = environment.startWorker()
                async let second = environment.startWorker()
                let workers = try await [first, second]

                for step in 0..<sequences.steps {
                    try await environment.publish(sequences.messages(steps: step..<step + 1))
                }
                let results = try await capture.results.waitFor(
                    sequences.resultCount, "every card's results")
                #expect(sequences.problems(in: results) == [])

                let sharded = try #require(environment.topology.sharded)
                for queue in sharded.queues {
                    let status = try await environment.channel.queueStatus(queue)
                    #expect(status.consumerCount == 2, "\(queue): one active and one waiting consumer")
                    #expect(status.messageCount == 0)
                }
                try await waitUntil("the workers to count their last batches", every: .milliseconds(20)) {
                    workers.map(processed).reduce(0, +) >= sequences.messageCount
                }
                #expect(workers.map(processed).reduce(0, +) == sequences.messageCount)
            }
        }
    }

    @Test("the standby worker takes the shards over when the active one stops: nothing lost, order kept")
    func standbyTakesOver() async throws {
        try await withSharedStore { path in
            try await withWorkerEnvironment(
                "ordered-takeover",
                configure: {
                    $0.topology.orderedShards = Self.shards
                    $0.store = .sqlite(path: path)
                    // Large batches of few cards: at the stop, the active worker holds many messages of each card
                    // that the standby must not overtake.
                    $0.prefetch = 40
                }
            ) { environment in
                let sequences = CardSequences(cards: (0..<8).map { "DC-\($0)" }, steps: 151)
                let capture = try await environment.resultCapture()
                let active = try await environment.startWorker()
                let standby = try await environment.startWorker()

                // The first consumer of a single-active-consumer queue gets everything; the second waits.
                try await environment.publish(sequences.messages(steps: 0..<3))
                try await capture.results.waitFor(
                    sequences.cards.count * 3 * 2, "the first steps")
                // Results reach the capture queue when published; the counter moves after the acknowledgement.
                try await waitUntil(
                    "the active worker to count the first steps", every: .milliseconds(20)
                ) { processed(active) >= sequences.cards.count * 3 }
                #expect(processed(active) == sequences.cards.count * 3)
                #expect(
                    processed(standby) == 0,
                    "the standby worker processed messages: the shards are not single-active-consumer")

                // The active worker stops in the middle of the rest.
                let firstPart = capture.results.count
                try await environment.publish(sequences.messages(steps: 3..<sequences.steps))
                try await capture.results.waitFor(firstPart + 40, "the rest to start")
                try await active.stop()
                let processedByActive = processed(active)

                let results = try await capture.results.waitFor(
                    sequences.resultCount, "every card's results after the hand-over")
                #expect(sequences.problems(in: results) == [])
                #expect(
                    processedByActive < sequences.messageCount,
                    "the active worker finished everything before it stopped")
                let expectedByStandby = sequences.messageCount - processedByActive
                try await waitUntil("the standby worker to count its last batch", every: .milliseconds(20)) {
                    processed(standby) >= expectedByStandby
                }
                #expect(processed(standby) == expectedByStandby)
                let sharded = try #require(environment.topology.sharded)
                for queue in sharded.queues {
                    let status = try await environment.channel.queueStatus(queue)
                    #expect(status.messageCount == 0)
                    #expect(status.consumerCount == 1, "\(queue): the standby worker consumes it")
                }
                #expect(standby.health.isReady)
            }
        }
    }

    @Test("switching on: messages already in the work queue are still processed, new ones go to the shards")
    func workQueueIsDrainedAfterTheSwitch() async throws {
        try await withWorkerEnvironment("ordered-switch") { environment in
            let capture = try await environment.resultCapture()
            try await environment.declareTopology()
            try await environment.publish(InboundSpec(json: #"{"action":"beforeTheSwitch"}"#, messageID: "before"))
            #expect(try await environment.messageCount(environment.topology.workQueue) == 1)

            environment.configuration.topology.orderedShards = Self.shards
            let worker = try await environment.startWorker()
            try await environment.publish(InboundSpec(json: #"{"action":"afterTheSwitch"}"#, messageID: "after"))
            let results = try await capture.results.waitFor(2, "both results")
            #expect(Set(results.compactMap(\.properties.messageID)) == ["before/0", "after/0"])
            try await worker.stop()

            // Unbound now: nothing new reaches the work queue.
            try await environment.publish(InboundSpec(json: #"{"action":"later"}"#, messageID: "later"))
            let sharded = try #require(environment.topology.sharded)
            #expect(try await environment.messageCount(environment.topology.workQueue) == 0)
            #expect(try await readyCounts(sharded.queues, environment).reduce(0, +) == 1)
        }
    }

    @Test("a retried message waits in its shard's retry queue and comes back to its shard")
    func retryReturnsToItsShard() async throws {
        try await withWorkerEnvironment(
            "ordered-retry",
            configure: {
                $0.topology.orderedShards = Self.shards
                $0.retryDelay = .seconds(3)
            }
        ) { environment in
            try await environment.declareTopology()
            let topology = environment.topology
            let sharded = try #require(topology.sharded)
            let card = "DC-RETRY"
            let header: [(String, AMQPFieldValue)] = [(ShardedTopology.cardHeader, .string(card))]
            try await environment.publish(
                InboundSpec(body: Array(#"{"action":"probe"}"#.utf8), messageID: "probe", headers: header))
            let shard = try #require(try await readyCounts(sharded.queues, environment).firstIndex(of: 1))
            try await environment.channel.purgeQueue(sharded.queue(shard))

            // No queue is bound to the actions exchange yet: the result comes back unroutable, a transient failure.
            let worker = try await environment.startWorker()
            try await environment.publish(
                InboundSpec(
                    body: Array(#"{"action":"retryMe","digitalCardId":"\#(card)"}"#.utf8), messageID: "retry-1",
                    headers: header))
            try await waitUntil(
                "the message in \(sharded.retryQueue(shard))", every: .milliseconds(20)
            ) {
                try await environment.messageCount(sharded.retryQueue(shard)) == 1
            }
            #expect(try await readyCounts(sharded.retryQueues, environment).reduce(0, +) == 1)
            #expect(try await environment.messageCount(topology.retryQueue) == 0)

            // With no worker consuming, the retry delay's end shows where it goes: back to its shard.
            try await worker.stop()
            try await waitUntil(
                "the message back in \(sharded.queue(shard))", every: .milliseconds(20)
            ) {
                try await environment.messageCount(sharded.queue(shard)) == 1
            }
            #expect(try await readyCounts(sharded.queues, environment).reduce(0, +) == 1)
            #expect(try await readyCounts(sharded.retryQueues, environment).reduce(0, +) == 0)
            #expect(try await environment.messageCount(topology.workQueue) == 0)

            // Now routable: processed on the next attempt.
            let actions = "\(environment.prefix).actions-capture"
            try await environment.channel.declareQueue(actions, durable: false, exclusive: true)
            try await environment.channel.bindQueue(
                actions, exchange: topology.resultExchanges.actions, routingKey: "#")
            let collector = try await environment.collect(queue: actions)
            _ = try await environment.startWorker()
            let results = try await collector.waitFor(1, "the retried message's result")
            #expect(results.first?.properties.messageID == "retry-1/0")
            #expect(results.first?.routingKey == "action.retryMe")
            #expect(try await environment.messageCount(topology.deadLetterQueue) == 0)
        }
    }
}

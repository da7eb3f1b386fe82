import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletRouting
import WalletWorker

extension Resilience {
    /// Issue 5, item 2: one RabbitMQ, one PostgreSQL, three `wallet-worker run` processes sharing the PostgreSQL
    /// store, 30,000 messages (ReplicaWorkload: long same-card CPS sequences, TNS, MG, actions, duplicated
    /// `message_id`s near and far apart, malformed input), one replica SIGKILLed midway and started again.
    /// Nested in `Resilience`, so it never runs beside the other suites that start worker processes.
    @Suite(
        "MultiReplica: three worker processes on one PostgreSQL store", .serialized, .timeLimit(.minutes(12)),
        .enabled(
            if: ReplicaDatabase.isConfigured,
            "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"))
    struct MultiReplicaTests {
        @Test(
            "ordered mode (--ordered-shards 4): every card in the state its sequence implies, results in order, nothing lost or applied twice"
        )
        func orderedMode() async throws {
            try await MultiReplicaRun(ordered: true).run()
        }

        @Test(
            "default mode: every card in a state the CPS table reaches, no lost update, nothing lost or applied twice")
        func defaultMode() async throws {
            try await MultiReplicaRun(ordered: false).run()
        }
    }
}

/// One run of the multi-replica test; `ordered` picks the mode. What it checks at the end is in ReplicaChecks.
struct MultiReplicaRun {
    let ordered: Bool
    static let replicaCount = 3
    static let shardCount = 4

    var mode: String { ordered ? "ordered" : "default" }

    func run() async throws {
        let workload = ReplicaWorkload()
        try #require(workload.all.count == ReplicaWorkload.totalMessages)
        let topology = ResilienceTopology("replicas-\(mode)")
        var exchanges = RoutingSettings.ResultExchanges()
        exchanges.events = topology.events
        exchanges.transactions = topology.transactions
        exchanges.replenishment = topology.replenishment
        exchanges.actions = topology.actions
        exchanges.installations = topology.installations
        let model = try await ReplicaModel(workload, exchanges: exchanges)

        try await ReplicaDatabase.with(mode) { database in
            let connection = try await TestBroker.connect(purpose: "multi-replica \(mode)")
            let result: Result<Void, any Error>
            do {
                result = .success(try await run(workload, model, topology, database, connection))
            } catch {
                result = .failure(error)
            }
            await connection.close(timeout: .seconds(5))
            await delete(topology)
            try result.get()
        }
    }

    // MARK: - The run

    private func run(
        _ workload: ReplicaWorkload, _ model: ReplicaModel, _ topology: ResilienceTopology, _ database: ReplicaDatabase,
        _ connection: AMQPConnection
    ) async throws {
        let clock = ContinuousClock()
        let started = clock.now
        let channel = try await connection.openChannel()
        try await declare(topology, on: channel)
        // Consumed as it arrives (the order of first arrival is what the ordered mode checks); on failure the
        // consumer ends with the connection.
        let capture = try await MessageCapture.start(queue: topology.capture, on: connection)

        let arguments = workerRunArguments(topology, store: database.storeURL, prefetch: 200, extra: modeFlags)
        var replicas: [WorkerProcess] = []
        var finished: [WorkerProcess] = []
        defer {
            for replica in replicas + finished { replica.kill() }
        }
        var ports: [Int] = []
        for number in 0..<Self.replicaCount {
            let replica = try WorkerProcess(arguments, amqpURL: TestBroker.urlText, label: "replica-\(mode)-\(number)")
            replicas.append(replica)
        }
        for replica in replicas {
            let port = try await replica.operationsPort()
            try await replica.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(60))
            ports.append(port)
        }

        try await channel.enableConfirms()
        try await publishConfirmed(workload.main.map { $0.outbound(to: topology.inbound) }, on: channel)
        let published = clock.now - started

        // Midway: SIGKILL the replica that has processed the most (in the ordered mode the active consumer of
        // shards; a standby's death would test nothing), then start it again.
        let halfway = model.distinctResultCount / 2
        try await waitUntil(
            "halfway: \(capture.count) results\n\(replicas.map { $0.logTail(15) }.joined(separator: "\n"))",
            every: .milliseconds(20)
        ) { capture.count >= halfway }
        let processedSoFar = ports.map { (try? metric("wallet_messages_total", port: $0)) ?? 0 }
        let victim = processedSoFar.indices.max { processedSoFar[$0] < processedSoFar[$1] }!
        let kill = KillInstant(time: Date().timeIntervalSince1970)
        replicas[victim].kill()
        let killedAt = clock.now - started
        #expect(processedSoFar[victim] > 0, "the killed replica had processed nothing")
        finished.append(replicas[victim])
        let restarted = try WorkerProcess(
            arguments, amqpURL: TestBroker.urlText, label: "replica-\(mode)-\(victim)-restarted")
        replicas[victim] = restarted
        ports[victim] = try await restarted.operationsPort()
        try await restarted.waitForHTTP(port: ports[victim], path: "/readyz", status: 200, timeout: .seconds(60))

        // Far-apart duplicates: copies of early messages, published last.
        try await publishConfirmed(workload.lateDuplicates.map { $0.outbound(to: topology.inbound) }, on: channel)

        let inputQueues = inputQueues(topology)
        let settled = try await waitUntilSettled(
            workload, capture, inputQueues, ports, connection, within: .seconds(400))
        let waiting = settled ? [:] : try await readyCounts(inputQueues, connection)
        try #require(
            settled,
            "the replicas did not finish: \(capture.count) results, \(waiting) ready\n\(replicas.map { $0.logTail(20) }.joined(separator: "\n"))"
        )
        let drained = clock.now - started
        // The kill left deliveries unacknowledged, which the broker gave to the other replicas.
        let redeliveries = ports.map { (try? metric("wallet_redeliveries_total", port: $0)) ?? 0 }.reduce(0, +)
        #expect(redeliveries > 0, "nothing was redelivered after the SIGKILL")

        for replica in replicas { replica.terminate() }
        for replica in replicas {
            let ended = await replica.waitForExit(timeout: .seconds(40))
            #expect(
                ended?.exit == .exited(0),
                "\(replica.process.label) \(ended?.exit.description ?? "did not stop")\n\(replica.logTail())")
        }
        finished += replicas
        replicas = []
        let stopped = clock.now - started

        // Every message acknowledged or dead-lettered: with no consumer left, anything unacknowledged would be back
        // in its queue.
        let leftOver = try await readyCounts(inputQueues, connection).filter { $0.value > 0 }
        #expect(leftOver.isEmpty, "messages left in \(leftOver)")

        let deadLetters = try await MessageCapture.drain(topology.deadLetterQueue, on: connection).map(
            \.properties.messageID)
        try await waitUntil("no results still waiting in the capture queue") {
            try await readyCount(topology.capture, on: connection) == 0
        }
        await capture.stop()
        let results = ReplicaCapture(capture.messages.map(CapturedCopy.init))
        let stored = try await database.contents()
        let retried = retriedMessageIDs(finished)

        var failedChecks: [String] = []
        func check(_ problems: [String], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            if !problems.isEmpty { failedChecks.append(what) }
            #expect(
                problems.isEmpty, "\(problems.count) \(what):\n\(problems.prefix(12).joined(separator: "\n"))",
                sourceLocation: sourceLocation)
        }

        check(ReplicaChecks.completeness(results, workload), "lost or incomplete results")
        check(
            ReplicaChecks.replays(results, workload, kill: kill), "results that differ between copies (applied twice)")
        check(ReplicaChecks.deadLetters(deadLetters, results, workload, kill: kill), "dead letters")
        check(ReplicaChecks.processedIDs(stored, workload), "processed ids in PostgreSQL")
        #expect(
            results.repeatedCopies >= ReplicaWorkload.nearDuplicates + ReplicaWorkload.lateDuplicateCount,
            "fewer replayed results than duplicates published: the replay path was not exercised")
        if ordered {
            // A retried message comes back behind its card's later messages (a documented exception to the order).
            let note = retried.isEmpty ? "" : " (messages that went through the retry queue: \(retried.prefix(10)))"
            check(ReplicaChecks.sameAsModel(results, model), "results unlike the sequence's (ordered mode)\(note)")
            check(
                ReplicaChecks.storeMatchesModel(stored, model),
                "stored state unlike the sequence's (ordered mode)\(note)")
        } else {
            check(ReplicaChecks.cardHistories(results, workload, stored), "card histories (default mode)")
        }
        print(
            "multi-replica \(mode): \(workload.all.count) messages, \(results.copies.count) distinct results "
                + "(\(results.repeatedCopies) repeated copies), \(deadLetters.count) dead letters, \(redeliveries) redeliveries, "
                + "\(retried.count) retries; "
                + "published in \(seconds(published)), killed replica \(victim) at \(seconds(killedAt)) (it had processed "
                + "\(Int(processedSoFar[victim])) of \(processedSoFar.map { Int($0) })), drained at \(seconds(drained)), "
                + "stopped at \(seconds(stopped)), done at \(seconds(clock.now - started))")
        if failedChecks.isEmpty {
            for replica in finished { replica.process.removeLog() }
        } else {
            print("multi-replica \(mode): the replicas' logs are kept: \(finished.map(\.process.logPath))")
        }
    }

    private func seconds(_ duration: Duration) -> String {
        String(format: "%.1f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    private var modeFlags: [String] {
        ordered ? ["--ordered-shards", "\(Self.shardCount)"] : []
    }

    // MARK: - Topology

    /// The worker's names in the test's topology, for the shard queues of the ordered mode.
    private func workerTopology(_ topology: ResilienceTopology) -> Topology {
        var names = Topology()
        names.inboundExchange = topology.inbound
        names.workQueue = topology.work
        names.retryQueue = topology.retry
        names.orderedShards = ordered ? Self.shardCount : 0
        return names
    }

    /// Where inbound messages wait: the work queue and its retry levels, and in the ordered mode every shard and its
    /// retry levels.
    private func inputQueues(_ topology: ResilienceTopology) -> [String] {
        let sharded = workerTopology(topology).sharded
        return [topology.work] + (sharded?.queues ?? [])
            + ([topology.retry] + (sharded?.retryQueues ?? [])).flatMap(Self.retryLevels)
    }

    /// The retry queues of `--retry-delay 200ms` and the default attempts, level 1 first.
    static func retryLevels(_ base: String) -> [String] {
        RetrySchedule(firstDelay: .milliseconds(200), longestDelay: .seconds(300), attempts: 5).queues(base).map(\.name)
    }

    /// `wallet-worker declare` (with the mode's flags), then the capture queue bound to every result exchange.
    private func declare(_ topology: ResilienceTopology, on channel: AMQPChannel) async throws {
        let declare = try WorkerProcess(
            ["declare"] + topology.flags + ["--retry-delay", "200ms", "--log-format", "json"] + modeFlags,
            amqpURL: TestBroker.urlText, label: "declare-\(topology.prefix)")
        defer {
            declare.kill()
            declare.process.removeLog()
        }
        guard let (exit, _) = await declare.waitForExit(timeout: .seconds(30)), exit == .exited(0) else {
            throw ChildProcessError("wallet-worker declare failed\n\(declare.logTail())")
        }
        try await channel.declareQueue(topology.capture, durable: true)
        for exchange in topology.resultExchanges {
            try await channel.bindQueue(topology.capture, exchange: exchange, routingKey: "#")
        }
    }

    private func delete(_ topology: ResilienceTopology) async {
        await topology.delete()
        guard let sharded = workerTopology(topology).sharded,
            let connection = try? await TestBroker.connect(purpose: "clean-up \(topology.prefix)")
        else { return }
        for queue in sharded.queues + sharded.retryQueues.flatMap(Self.retryLevels) {
            if let channel = try? await connection.openChannel() {
                _ = try? await channel.deleteQueue(queue)
                try? await channel.close()
            }
        }
        if let channel = try? await connection.openChannel() {
            try? await channel.deleteExchange(sharded.hashExchange)
            try? await channel.close()
        }
        await connection.close(timeout: .seconds(5))
    }

    // MARK: - Progress

    private func readyCounts(_ queues: [String], _ connection: AMQPConnection) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for queue in queues { counts[queue] = try await readyCount(queue, on: connection) }
        return counts
    }

    private func metric(_ name: String, port: Int) throws -> Double {
        metricValue(in: try httpGet(port: port, path: "/metrics").body, name)
    }

    /// The message ids the replicas' logs say went to the retry queue.
    private func retriedMessageIDs(_ replicas: [WorkerProcess]) -> [String] {
        replicas.flatMap { replica in
            replica.log.split(separator: "\n").filter { $0.contains(#""message":"sent to the retry queue""#) }
                .compactMap { line in
                    line.range(of: #""message_id":"[^"]*""#, options: .regularExpression)
                        .map { String(line[$0].dropFirst(#""message_id":""#.count).dropLast()) }
                }
        }
    }

    /// Waits until the run is over: nothing ready in an input queue and no replica moving. Nothing new for half a
    /// second while each replica has finished as many deliveries as its batches took (`wallet_processing_seconds_count`
    /// against `wallet_batch_size_sum`) and every message has its last result; or nothing new for 10 s whatever
    /// the rest says (a requeued delivery is never counted as finished; a lost message never gets its result: the
    /// checks afterwards say which).
    private func waitUntilSettled(
        _ workload: ReplicaWorkload, _ capture: MessageCapture, _ queues: [String], _ ports: [Int],
        _ connection: AMQPConnection, within limit: Duration
    ) async throws -> Bool {
        let clock = ContinuousClock()
        var last: (metrics: [Double], results: Int)?
        var unchangedSince: ContinuousClock.Instant?
        // Not settling is reported by the caller, with the accounting.
        let settled: Void? = try? await eventually("the replicas to settle", within: limit, every: .milliseconds(250)) {
            let ready = try await readyCounts(queues, connection).values.allSatisfy { $0 == 0 }
            let now = (metrics: try ports.flatMap(batchMetrics), results: capture.count)
            defer { last = now }
            guard ready, let last, last.metrics == now.metrics, last.results == now.results else {
                unchangedSince = nil
                return false
            }
            let since = unchangedSince ?? clock.now
            unchangedSince = since
            if clock.now - since >= .seconds(10) { return true }
            let idle = stride(from: 0, to: now.metrics.count, by: 2).allSatisfy {
                now.metrics[$0] == now.metrics[$0 + 1]
            }
            guard idle, clock.now - since >= .milliseconds(500) else { return false }
            let answered = Set(
                capture.messages.compactMap { message -> String? in
                    guard let id = message.properties.messageID, let (inbound, _) = ReplicaCapture.split(id),
                        !message.routingKey.hasPrefix("card.serverMessage.")
                    else { return nil }
                    return inbound
                })
            return workload.distinctIDs.isSubset(of: answered)
        }
        return settled != nil
    }

    /// Deliveries taken into batches, and deliveries finished (acknowledged, retried or dead-lettered).
    private func batchMetrics(port: Int) throws -> [Double] {
        let body = try httpGet(port: port, path: "/metrics").body
        return [
            metricValue(in: body, "wallet_batch_size_sum"),
            metricValue(in: body, "wallet_processing_seconds_count"),
        ]
    }
}

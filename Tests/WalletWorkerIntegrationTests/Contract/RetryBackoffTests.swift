import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 13: a message's own transient failures wait exponentially longer, with jitter (`RetrySchedule`).
    /// The broker does the waiting, so this checks what the broker did: each dead letter's `x-death` names one trip
    /// through each retry level, the copies of levels 2 and up carried an `expiration` (recorded by the broker as
    /// `original-expiration`) from the upper half of that level's TTL, the copies of one batch drew different
    /// ones, and the whole journey took at least the sum of the shortest waits. Before the change every retry went
    /// through the one retry queue (one `x-death` entry counting every trip) after the same fixed delay.
    /// In quorum mode too: RabbitMQ 3.10 expires quorum-queue messages by their own `expiration`.
    @Suite("Exponential retry delay with jitter", .timeLimit(.minutes(3)))
    struct RetryBackoff {
        static let messages = 12

        @Test(
            "each retry waits in its level's queue, twice as long as the last, the copies' expirations spread over the upper half",
            arguments: ["classic", "quorum"])
        func retriesWaitLongerEachTime(queueType: String) async throws {
            let database = temporarySQLitePath("backoff-\(queueType)")
            defer { removeSQLite(database) }
            // 300 ms, then 300-600 ms in .2, then 600-1,200 ms in .3, then the dead letters after the fourth attempt.
            let settings = ["--retry-attempts", "4", "--retry-delay-max", "10s", "--queue-type", queueType]
            // Every message refused alike would pause the worker (`ResultsPauseTests`); the retry levels are the
            // point here, so the pause needs more distinct messages than the test sends, and the last attempts of
            // messages refused while none is taken are dead-lettered.
            let perMessage = ["--results-pause-activation", "1000", "--results-pause-quiet-activation", "0"]
            try await withResilienceTopology("backoff-\(queueType)", retryDelay: "300ms", declareFlags: settings) {
                topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(
                        topology, store: "sqlite:\(database)", prefetch: 50, retryDelay: "300ms",
                        extra: ["--store-busy-timeout", "50ms"] + settings + perMessage),
                    amqpURL: TestBroker.urlText, label: "backoff-worker-\(queueType)")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()

                // The results cannot be routed (the capture queue is unbound): every attempt fails transiently, a
                // failure of the messages' own, so they go through the retry queues. (A store that is out holds them
                // instead: StoreLock.)
                try await topology.unbindCapture(on: channel)
                let inbound = (0..<Self.messages).map {
                    InboundSpec.cps("backoff-\($0)", card: "BACKOFF-\($0)", code: "CBP.info.tokenProvisioned")
                }
                let published = ContinuousClock.now
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                do {
                    try await waitUntil(
                        "the messages to be dead-lettered\n\(worker.logTail())",
                        every: .milliseconds(50)
                    ) {
                        try await readyCount(topology.deadLetterQueue, on: connection) >= Self.messages
                    }
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }
                let journey = ContinuousClock.now - published
                try await topology.bindCapture(on: channel)
                #expect(journey >= .milliseconds(1_200), "300 + 300 + 600 ms at least; took \(journey)")

                let dead = try await MessageCapture.drain(topology.deadLetterQueue, on: connection)
                #expect(Set(dead.compactMap(\.properties.messageID)) == Set(inbound.map(\.id)))
                var drawn: [String: [Int]] = [:]
                for letter in dead {
                    let deaths = Self.xDeath(letter)
                    let id = letter.properties.messageID ?? "?"
                    #expect(
                        Set(deaths.keys) == [topology.retry, "\(topology.retry).2", "\(topology.retry).3"],
                        "\(id): x-death \(deaths)")
                    #expect(deaths.values.allSatisfy { $0.count == 1 && $0.reason == "expired" }, "\(id): \(deaths)")
                    #expect(deaths[topology.retry]?.expiration == nil, "level 1 waits the queue's TTL: \(deaths)")
                    for (level, ttl) in [(2, 600), (3, 1_200)] {
                        guard let expiration = deaths["\(topology.retry).\(level)"]?.expiration else {
                            Issue.record("\(id): level \(level) copy had no expiration: \(deaths)")
                            continue
                        }
                        #expect((ttl / 2...ttl).contains(expiration), "\(id): level \(level) expiration \(expiration)")
                        drawn["\(level)", default: []].append(expiration)
                    }
                    let error = letter.properties.headers?["x-worker-error"]
                    let text: String? = if case .string(let value)? = error { value } else { nil }
                    #expect(text?.contains("4 attempts") == true, "x-worker-error: \(String(describing: error))")
                }
                for (level, values) in drawn {
                    #expect(Set(values).count > 1, "level \(level): every copy drew the same expiration \(values)")
                }
                #expect(try worker.metric(port: port, "wallet_retries_total") == Double(3 * Self.messages))
                #expect(worker.isRunning)
            }
        }

        struct Death: CustomStringConvertible {
            var count: Int64
            var reason: String
            var expiration: Int?
            var description: String { "count \(count), \(reason), expiration \(expiration.map(String.init) ?? "none")" }
        }

        /// The `x-death` entries by queue.
        static func xDeath(_ delivery: CapturedMessage) -> [String: Death] {
            guard case .array(let entries)? = delivery.properties.headers?["x-death"] else { return [:] }
            var deaths: [String: Death] = [:]
            for case .table(let entry) in entries {
                guard case .string(let queue)? = entry["queue"] else { continue }
                let count: Int64 = if case .int64(let value)? = entry["count"] { value } else { -1 }
                let reason = if case .string(let value)? = entry["reason"] { value } else { "?" }
                let expiration: Int? =
                    if case .string(let value)? = entry["original-expiration"] { Int(value) } else { nil }
                deaths[queue] = Death(count: count, reason: reason, expiration: expiration)
            }
            return deaths
        }
    }
}

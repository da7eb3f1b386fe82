import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// CONTRACT.md §10: effects are applied once per message_id even when the broker redelivers, because the
    /// store records the message_id and its results atomically with the effects. SIGKILL is the harshest
    /// redelivery: whatever the worker held unacknowledged comes back to a fresh process on the same store.
    @Suite("Crash safety", .timeLimit(.minutes(4)))
    struct CrashSafety {
        static let cards = 500
        static let recordsPerCard = 23

        /// Card `c`'s 40 messages, in publication order. Final states: c % 3 == 0 active, 1 suspended, 2 deleted.
        static func lifecycle(card c: Int) -> [InboundSpec] {
            let card = "CRASH-\(c)"
            func id(_ step: Int) -> String { "crash-c\(c)-s\(step)" }
            var messages: [InboundSpec] = [.cps(id(0), card: card, code: "CBP.info.tokenProvisioned")]
            var record = 0
            func nextRecord(_ step: Int) -> InboundSpec {
                defer { record += 1 }
                let minute = record
                return .tns(
                    id(step), card: card,
                    record: (
                        id: "T-\(c)-\(record)", date: String(format: "2026-11-10T10:%02d:00Z", minute),
                        amount: Double(record) + 0.25
                    ))
            }
            for step in 1...20 { messages.append(nextRecord(step)) }
            for step in 21...24 { messages.append(.mg(id(step), card: card)) }
            messages.append(.cpsStack(id(25), card: card, codes: ["CBP.info.tokenSuspended", "CBP.info.tokenResumed"]))
            for step in 26...35 { messages.append(.action(id(step), action: "crash.refresh.\(c).\(step)")) }
            for step in 36...38 { messages.append(nextRecord(step)) }
            let finalCode = ["CBP.info.paymentAccepted", "CBP.info.tokenSuspended", "CBP.info.tokenDeleted"][c % 3]
            messages.append(.cps(id(39), card: card, code: finalCode))
            return messages
        }

        @Test(
            "SIGKILL two to six times while processing 20,000 mixed messages on the SQLite store: nothing lost, nothing applied twice"
        )
        func sigkillMidwayLosesNothingAndAppliesNothingTwice() async throws {
            let database = temporarySQLitePath("crash")
            defer { removeSQLite(database) }
            try await withResilienceTopology("crash") { topology, connection, channel in
                // Round-robin over the cards, so every crash lands in the middle of many lifecycles.
                let lifecycles = (0..<Self.cards).map { Self.lifecycle(card: $0) }
                var inbound: [InboundSpec] = []
                for step in 0..<40 {
                    for card in 0..<Self.cards { inbound.append(lifecycles[card][step]) }
                }
                #expect(inbound.count == 20_000)
                #expect(Set(inbound.map(\.messageID)).count == inbound.count)
                let totalResults = inbound.map(\.expectedResults).reduce(0, +)
                try await channel.enableConfirms()
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)

                let arguments = workerRunArguments(
                    topology, store: "sqlite:\(database)", prefetch: 200, extra: ["--history-limit", "100"])
                var runs: [WorkerProcess] = []
                defer {
                    for run in runs {
                        run.kill()
                        run.process.removeLog()
                    }
                }
                func start(_ label: String) throws -> WorkerProcess {
                    let worker = try WorkerProcess(arguments, amqpURL: TestBroker.urlText, label: label)
                    runs.append(worker)
                    return worker
                }

                // Crashes at about 30 % and 60 % of the results; more (75 % to 95 %) while no run has replayed
                // anything yet: a SIGKILL between a batch's commit and its acknowledgement is what makes the next
                // run replay, and one landing elsewhere (before the commit) would leave the replay path untested.
                // Each run's wallet_replays_total counts the replays of the crash before it; a read that fails
                // fails the test rather than counting as none (a busy machine once made it look like no replay).
                func replaysOf(_ worker: WorkerProcess, port: Int) async throws -> Double {
                    var replays: Double?
                    var lastError = ""
                    try await waitUntil(
                        "wallet_replays_total to be read (\(lastError))",
                        every: .milliseconds(200)
                    ) {
                        do {
                            replays = try worker.metric(port: port, "wallet_replays_total")
                        } catch {
                            lastError = "\(error)"
                        }
                        return replays != nil
                    }
                    return replays ?? 0
                }
                var replays = 0.0
                var number = 0
                for fraction in [0.3, 0.6, 0.75, 0.85, 0.9, 0.95] {
                    if fraction > 0.6 && replays > 0 { break }
                    number += 1
                    let worker = try start("crash-worker-\(number)")
                    let port = try await worker.operationsPort()
                    try await waitUntil(
                        "run \(number) did not reach \(fraction) of the results\n\(worker.logTail())",
                        every: .milliseconds(20)
                    ) {
                        try await readyCount(topology.capture, on: connection) >= Int(Double(totalResults) * fraction)
                    }
                    replays += try await replaysOf(worker, port: port)
                    #expect(worker.isRunning, "\(worker.logTail())")
                    worker.kill()
                }

                // Then runs until the queue is drained (the last run is stopped with SIGTERM).
                let last = try start("crash-worker-final")
                let lastPort = try await last.operationsPort()
                try await waitUntil(
                    "the queue was not drained\n\(last.logTail())", every: .milliseconds(100)
                ) {
                    let ready = try await readyCount(topology.work, on: connection)
                    let retry = try await readyCount(topology.retry, on: connection)
                    let results = try await readyCount(topology.capture, on: connection)
                    return ready == 0 && retry == 0 && results >= totalResults
                }
                replays += try await replaysOf(last, port: lastPort)

                // The final state, asked of the same worker: an MG and a TNS query per card.
                let queries = (0..<Self.cards).flatMap { c in
                    [
                        InboundSpec.mg("crash-q-mg-\(c)", card: "CRASH-\(c)"),
                        InboundSpec.tns("crash-q-tns-\(c)", card: "CRASH-\(c)"),
                    ]
                }
                try await publishConfirmed(queries.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil(
                    "the final queries were not answered\n\(last.logTail())", every: .milliseconds(100)
                ) {
                    let ready = try await readyCount(topology.work, on: connection)
                    let results = try await readyCount(topology.capture, on: connection)
                    return ready == 0 && results >= totalResults + queries.count
                }
                last.terminate()
                let ended = await last.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(0), "\(last.logTail())")
                #expect(try await readyCount(topology.work, on: connection) == 0)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)

                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let accounting = ResultAccounting(results: results, inbound: inbound + queries)

                // Nothing lost: every message has all its results (ids `<message_id>/0..n-1`), nothing else.
                #expect(
                    accounting.incomplete.isEmpty,
                    "\(accounting.incomplete.count) messages lost results (id, expected, found): \(accounting.incomplete.prefix(5))"
                )
                #expect(accounting.unexpected.isEmpty, "unexpected results: \(accounting.unexpected.prefix(5))")
                // Nothing applied twice: a result published again (after a crash) is the recorded one, byte for
                // byte (`processedAt` included); a second application would carry another processedAt or
                // another state.
                #expect(
                    accounting.differingDuplicates.isEmpty,
                    "\(accounting.differingDuplicates.count) results differ between deliveries, e.g. \(accounting.differingDuplicates.prefix(2))"
                )
                // A replay republishes results only when the crash fell between the confirm and the acknowledgement;
                // one between the commit and the publish replays results nobody saw yet (no duplicate): both count.
                #expect(
                    replays > 0,
                    "no message was replayed (\(replays) replays, \(accounting.identicalDuplicates) republished results) after \(number) crashes: the replay path was not exercised"
                )

                // The final state is the one the lifecycles imply.
                var byID: [String: CapturedMessage] = [:]
                for result in results { if let id = result.messageID { byID[id] = result } }
                var wrong: [String] = []
                for c in 0..<Self.cards {
                    guard let mg = byID["crash-q-mg-\(c)/0"]?.jsonObject,
                        let tns = byID["crash-q-tns-\(c)/0"]?.jsonObject
                    else {
                        wrong.append("card \(c): no query result")
                        continue
                    }
                    let error = (mg["error"] as? [String: Any])?["kind"] as? String
                    switch c % 3 {
                    case 0:
                        if mg["outcome"] as? String != "replenished" { wrong.append("card \(c) (active): MG \(mg)") }
                    case 1:
                        if error != "replenishmentNotAllowed" { wrong.append("card \(c) (suspended): MG \(mg)") }
                    default:
                        if error != "unknownDigitalCardID" { wrong.append("card \(c) (deleted): MG \(mg)") }
                    }
                    if c % 3 == 2 {
                        if tns["records"] != nil { wrong.append("card \(c) (deleted): TNS has records") }
                        continue
                    }
                    let ids = (tns["records"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
                    let expected = Set((0..<Self.recordsPerCard).map { "T-\(c)-\($0)" })
                    if ids.count != Self.recordsPerCard || Set(ids) != expected {
                        wrong.append("card \(c): records \(ids) (each of \(Self.recordsPerCard) expected once)")
                    }
                }
                #expect(wrong.isEmpty, "\(wrong.count) cards in an unexpected state: \(wrong.prefix(3))")

                // Every CPS event of every run: a re-applied install would have produced `errorEncountered`.
                let errors = results.filter { $0.routingKey == "card.errorEncountered" }
                #expect(errors.isEmpty, "unexpected CPS errors: \(errors.prefix(2).map(\.text))")
            }
        }
    }
}

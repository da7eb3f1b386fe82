// 20,000 mixed messages through one worker (prefetch 200, SQLite store): nothing lost, nothing duplicated.
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletRouting
import WalletStore
import WalletWorker

/// The mix, and what the contract says it must publish, per result exchange (a model of §3's card table).
private struct VolumeMix {
    enum Kind: String, CaseIterable { case cps, tns, mg, action, installation, ignored, malformed }
    enum CardState { case active, suspended, deleted }

    var messages: [InboundSpec] = []
    var kinds: [Kind: Int] = [:]
    /// Results per exchange role: events, transactions, replenishment, actions, installations.
    var expected: [String: Int] = [
        "events": 0, "transactions": 0, "replenishment": 0, "actions": 0, "installations": 0,
    ]
    var malformedIDs: Set<String> = []
    /// Every result's message_id, `<inbound id>/<n>`.
    var expectedResultIDs: Set<String> = []

    init(count: Int, cards: Int, seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var states: [String: CardState] = [:]
        for index in 0..<count {
            let id = "vol-\(index)"
            let resultsBefore = expected.values.reduce(0, +)
            defer {
                for n in 0..<(expected.values.reduce(0, +) - resultsBefore) { expectedResultIDs.insert("\(id)/\(n)") }
            }
            let card = "V-\(Int.random(in: 0..<cards, using: &random))"
            let roll = Int.random(in: 0..<100, using: &random)
            let kind: Kind =
                switch roll {
                case 0..<2: .malformed
                case 2..<44: .cps
                case 44..<60: .tns
                case 60..<70: .mg
                case 70..<80: .action
                case 80..<90: .installation
                default: .ignored
                }
            kinds[kind, default: 0] += 1
            switch kind {
            case .cps:
                let op = Int.random(in: 0..<100, using: &random)
                let (code, next): (String, CardState?) = {
                    let state = states[card]
                    switch op {
                    case 0..<40:  // install: absent, active -> active
                        return ("CBP.info.tokenProvisioned", state == nil || state == .active ? .active : nil)
                    case 40..<65:  // suspend: active, suspended -> suspended
                        return ("CBP.info.tokenSuspended", state == .active || state == .suspended ? .suspended : nil)
                    case 65..<90:  // resume: suspended, active -> active
                        return ("CBP.info.tokenResumed", state == .active || state == .suspended ? .active : nil)
                    default:  // delete: active, suspended, deleted -> deleted
                        return ("CBP.info.tokenDeleted", state == nil ? nil : .deleted)
                    }
                }()
                // An allowed transition publishes serverMessage + completed; a forbidden one errorEncountered only.
                if let next {
                    states[card] = next
                    expected["events", default: 0] += 2
                } else {
                    expected["events", default: 0] += 1
                }
                messages.append(
                    InboundSpec(
                        json:
                            #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)","serverMessage":{"code":"\#(code)","text":"volume","severity":"info","params":[]}}"#,
                        messageID: id))
            case .tns:
                expected["transactions", default: 0] += 1
                let day = 1 + index % 28
                let date = "2026-11-\(day < 10 ? "0" : "")\(day)T10:\(String(format: "%02d", index % 60)):00Z"
                messages.append(
                    InboundSpec(
                        json:
                            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)","transaction":{"id":"T-\#(index)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(index % 500).25,"merchantName":"Shop \#(index % 37)","isAuxiliaryTransaction":false}}"#,
                        messageID: id))
            case .mg:
                expected["replenishment", default: 0] += 1
                messages.append(
                    InboundSpec(
                        json:
                            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#,
                        messageID: id))
            case .action:
                expected["actions", default: 0] += 1
                messages.append(
                    InboundSpec(
                        json: #"{"action":"promo.\#(index % 7)","aps":{"content-available":1}}"#, messageID: id))
            case .installation:
                expected["installations", default: 0] += 1
                let installation = "inst-\(index % 900)"
                if index % 5 == 0 {
                    messages.append(
                        InboundSpec(
                            json: #"{"installationId":"\#(installation)"}"#, messageID: id,
                            type: "DeviceInstallationDeleted"))
                } else {
                    messages.append(
                        InboundSpec(
                            json:
                                #"{"installationId":"\#(installation)","platform":"apns","pushChannel":"a1b2c3d4\#(String(index, radix: 16).count % 2 == 0 ? String(index, radix: 16) : "0" + String(index, radix: 16))","tags":["user:\#(index % 300)"]}"#,
                            messageID: id, type: "DeviceInstallation"))
                }
            case .ignored:
                messages.append(
                    InboundSpec(
                        json: #"{"aps":{"alert":"hello \#(index)"},"campaign":"c\#(index % 11)"}"#,
                        messageID: id))
            case .malformed:
                // Truncated JSON, not an object, not UTF-8: each dead-lettered with a `rejected` result.
                expected["events", default: 0] += 1
                malformedIDs.insert(id)
                let body: [UInt8] =
                    switch index % 3 {
                    case 0: Array(#"{"sender":"CPS","digitalCardId":"#.utf8)
                    case 1: Array("[1,2,3]".utf8)
                    default: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]
                    }
                messages.append(InboundSpec(body: body, messageID: id))
            }
        }
    }

    var totalResults: Int { expected.values.reduce(0, +) }
}

@Suite("Volume through the broker", .serialized)
struct VolumeTests {
    @Test(
        "20,000 mixed messages: each acknowledged or dead-lettered, each result exactly once",
        .timeLimit(.minutes(5)))
    func twentyThousandMixedMessages() async throws {
        let mix = VolumeMix(count: 20_000, cards: 500, seed: 0x5EED_2026)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-volume-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let storePath = directory.appendingPathComponent("wallet.sqlite").path

        try await withWorkerEnvironment(
            "volume",
            configure: {
                $0.prefetch = 200
                $0.store = .sqlite(path: storePath)
            }
        ) { environment in
            let topology = environment.topology
            try await environment.declareTopology()
            let capture = try await environment.resultCapture()
            let dead = try await environment.deadLetterReader()

            // Everything is in the work queue before the worker starts, so batches are full.
            let publishStart = ContinuousClock.now
            for start in stride(from: 0, to: mix.messages.count, by: 1_000) {
                try await environment.publish(Array(mix.messages[start..<min(start + 1_000, mix.messages.count)]))
            }
            let publishElapsed = ContinuousClock.now - publishStart
            let queued = try await environment.messageCount(topology.workQueue)
            try #require(
                queued == UInt32(mix.messages.count), "the work queue holds \(queued) of \(mix.messages.count)")

            let started = ContinuousClock.now
            let worker = try await environment.startWorker()
            let expectedTotal = mix.totalResults
            try await capture.results.waitFor(expectedTotal, "all results of the volume run")
            try await dead.waitFor(mix.malformedIDs.count, "the malformed messages' dead letters")
            let elapsed = ContinuousClock.now - started
            let rate = Double(mix.messages.count) / elapsed.inSeconds
            print(
                """
                VolumeTests: published \(mix.messages.count) messages in \(publishElapsed); the worker (prefetch 200, \
                store \(environment.configuration.store)) processed them in \(elapsed): \
                \(Int(rate)) messages/s, \(Int(Double(expectedTotal) / elapsed.inSeconds)) results/s; mix \(mix.kinds.map { "\($0.key.rawValue)=\($0.value)" }.sorted())
                """)

            // Nothing after the last expected result: a sentinel is processed after everything else.
            let results = try await resultsBeforeSentinel(environment, capture)
            try await worker.stop()
            let work = try await environment.messageCount(topology.workQueue)
            let retry = try await environment.messageCount(topology.retryQueue)
            #expect(work == 0, "messages left in the work queue (unacknowledged ones are requeued at stop)")
            #expect(retry == 0, "messages in the retry queue: a transient failure happened")

            #expect(results.count == expectedTotal, "results: expected \(expectedTotal), got \(results.count)")
            let ids = results.compactMap(\.properties.messageID)
            #expect(ids.count == results.count, "results without message_id: \(results.count - ids.count)")
            let duplicates = Dictionary(grouping: ids, by: { $0 }).filter { $0.value.count > 1 }
            #expect(
                duplicates.isEmpty,
                "\(duplicates.count) result message_ids arrived more than once, e.g. \(duplicates.keys.prefix(5))")
            let missing = mix.expectedResultIDs.subtracting(ids)
            let unexpected = Set(ids).subtracting(mix.expectedResultIDs)
            #expect(missing.isEmpty, "\(missing.count) expected results missing, e.g. \(missing.sorted().prefix(5))")
            #expect(unexpected.isEmpty, "\(unexpected.count) unexpected results, e.g. \(unexpected.sorted().prefix(5))")
            let redelivered = results.filter(\.redelivered).count
            #expect(redelivered == 0)

            let roles: [(String, String)] = [
                ("events", topology.resultExchanges.events), ("transactions", topology.resultExchanges.transactions),
                ("replenishment", topology.resultExchanges.replenishment),
                ("actions", topology.resultExchanges.actions),
                ("installations", topology.resultExchanges.installations),
            ]
            let perExchange = Dictionary(grouping: results, by: \.exchange).mapValues(\.count)
            for (role, exchange) in roles {
                #expect(
                    perExchange[exchange, default: 0] == mix.expected[role],
                    "\(role) (\(exchange)): expected \(mix.expected[role] ?? 0), got \(perExchange[exchange, default: 0])"
                )
            }
            let rejected = results.filter { $0.properties.type == "rejected" }
            #expect(
                Set(rejected.compactMap { $0.properties.messageID?.split(separator: "/").first.map(String.init) })
                    == mix.malformedIDs)

            let deadIDs = dead.messages.compactMap(\.properties.messageID)
            #expect(
                dead.count == mix.malformedIDs.count,
                "dead letters: expected \(mix.malformedIDs.count), got \(dead.count)")
            #expect(Set(deadIDs) == mix.malformedIDs, "the dead-letter queue must hold exactly the malformed messages")
            #expect(
                dead.messages.allSatisfy { $0.stringHeader("x-worker-error") != nil },
                "dead letters without x-worker-error")
            #expect(
                FileManager.default.fileExists(atPath: storePath),
                "the worker never created its SQLite store at \(storePath)")
        }
    }
}

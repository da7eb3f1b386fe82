import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

// Helpers of the resilience suites: worker processes on a topology of their own. The broker connection, clean-up,
// queue capture and `eventually` are BrokerTestSupport's; inbound messages are `InboundSpec` (WorkerFixture.swift).
// Every suite of this file's family nests in `Resilience` (or, for the two longest, `LongRuns`), which runs them one
// at a time: they start worker processes and move tens of thousands of messages, and the machine has two cores.

@Suite("Resilience", .serialized)
enum Resilience {}

/// The second chain: the dead-letter walk at scale (25 looks at 20,000 dead letters in each queue type: 183 s idle and
/// 267 s loaded in the first chain, more than half of it). Beside `Resilience` it halves the run.
///
/// The serialized chains run their suites in the order of their files' names, and `Resilience` ends with the cluster
/// node loss (`WorkerSurvivesANodeLossTests.swift`): booted first in a chain, beside every other suite's start, its
/// three nodes took 76-150 s to start (17-20 s on a quiet machine), which failed loaded runs at the test's 150 s
/// bound. Last, the other suites' start is long over (measured 2026-11-28). Keep it the last file of the chain.
///
/// The reconnect order's end-to-end test (`ReconnectOrderTests`, two cases, 24-60 s) runs in this chain too: with it
/// and the results pause's tests in `Resilience`, that chain took 409 s against 296 s in a loaded run (2026-11-29).
/// The quorum pause's (`QuorumPauseTests`, about 50 s) runs here for the same reason.
@Suite("Long runs", .serialized)
enum LongRuns {}

// MARK: - The topology a test owns

/// Unique names for every queue and exchange of the worker, plus one capture queue bound with `#` to all five
/// result exchanges (results are published `mandatory`: an unbound result exchange would make every publish
/// a transient failure).
struct ResilienceTopology: Sendable {
    let prefix: String
    let inbound, work, retry, deadLetterExchange, deadLetterQueue: String
    let events, transactions, replenishment, actions, installations: String
    let capture: String

    init(_ purpose: String) {
        prefix = uniqueName(purpose)
        inbound = "\(prefix).in"
        work = "\(prefix).work"
        retry = "\(prefix).retry"
        deadLetterExchange = "\(prefix).dlx"
        deadLetterQueue = "\(prefix).dead"
        events = "\(prefix).events"
        transactions = "\(prefix).transactions"
        replenishment = "\(prefix).replenishment"
        actions = "\(prefix).actions"
        installations = "\(prefix).installations"
        capture = "\(prefix).capture"
    }

    var resultExchanges: [String] { [events, transactions, replenishment, actions, installations] }

    /// The topology flags `run` and `declare` take.
    var flags: [String] {
        [
            "--inbound-exchange", inbound, "--work-queue", work, "--retry-queue", retry,
            "--dead-letter-exchange", deadLetterExchange, "--dead-letter-queue", deadLetterQueue,
            "--events-exchange", events, "--transactions-exchange", transactions,
            "--replenishment-exchange", replenishment, "--actions-exchange", actions,
            "--installations-exchange", installations,
        ]
    }

    /// `wallet-worker declare` with these names (and the retry delay the run will use: it is the retry queue's
    /// x-message-ttl), then the durable capture queue bound to every result exchange.
    func declare(
        url: String = TestBroker.urlText, retryDelay: String, extraFlags: [String] = [], on channel: AMQPChannel
    ) async throws {
        let declare = try WorkerProcess(
            ["declare"] + flags + ["--retry-delay", retryDelay, "--log-format", "json"] + extraFlags, amqpURL: url,
            label: "declare-\(prefix)")
        defer {
            declare.kill()
            declare.process.removeLog()
        }
        guard let (exit, _) = await declare.waitForExit(timeout: .seconds(30)) else {
            throw ChildProcessError("wallet-worker declare did not finish\n\(declare.logTail())")
        }
        guard exit == .exited(0) else {
            throw ChildProcessError("wallet-worker declare \(exit)\n\(declare.logTail())")
        }
        try await channel.declareQueue(capture, durable: true)
        for exchange in resultExchanges {
            try await channel.bindQueue(capture, exchange: exchange, routingKey: "#")
        }
    }

    /// Unbinds the capture queue from the result exchanges: the worker's results (published `mandatory`) come back
    /// unroutable, a transient failure of each message's own.
    func unbindCapture(on channel: AMQPChannel) async throws {
        for exchange in resultExchanges {
            try await channel.unbindQueue(capture, exchange: exchange, routingKey: "#")
        }
    }

    func bindCapture(on channel: AMQPChannel) async throws {
        for exchange in resultExchanges {
            try await channel.bindQueue(capture, exchange: exchange, routingKey: "#")
        }
    }

    /// Every queue (each retry level `<retry>.2`, … as RetrySchedule names them, that a test's settings may have
    /// declared) and exchange of the topology.
    var queues: [String] { [work, retry, deadLetterQueue, capture] + (2...12).map { "\(retry).\($0)" } }
    var exchanges: [String] { resultExchanges + [inbound, deadLetterExchange, "\(deadLetterQueue).loop"] }

    /// Deletes every queue and exchange (missing ones are fine), on a fresh connection; for tests that own the
    /// topology without `withResilienceTopology`.
    func delete(url: String = TestBroker.urlText) async {
        try? await deleteTopology(queues: queues, exchanges: exchanges, url: url, purpose: "clean-up \(prefix)")
    }
}

/// Runs `body` with a connection, a channel and a declared topology; deletes the topology and closes the
/// connection afterwards, also when `body` throws.
func withResilienceTopology<T>(
    _ purpose: String, url: String = TestBroker.urlText, retryDelay: String = "200ms", declareFlags: [String] = [],
    _ body: (ResilienceTopology, AMQPConnection, AMQPChannel) async throws -> T
) async throws -> T {
    let topology = ResilienceTopology(purpose)
    return try await withBrokerSession(purpose, url: url) { session in
        session.own(queues: topology.queues)
        session.own(exchanges: topology.exchanges)
        try await topology.declare(url: url, retryDelay: retryDelay, extraFlags: declareFlags, on: session.channel)
        return try await body(topology, session.connection, session.channel)
    }
}

// MARK: - Inbound messages

extension InboundSpec {
    /// A resilience test's inbound message: a JSON body and the number of results the contract says it publishes.
    init(messageID: String, body: String, expectedResults: Int, type: String? = nil) {
        self.init(body: Array(body.utf8), messageID: messageID, type: type, expectedResults: expectedResults)
    }

    /// CPS with one server message: a `serverMessage` event and `completed` (or one `errorEncountered`).
    static func cps(_ id: String, card: String, code: String) -> InboundSpec {
        InboundSpec(
            messageID: id,
            body:
                #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)","serverMessage":{"code":"\#(code)","text":"t","severity":"info"}}"#,
            expectedResults: 2)
    }

    /// CPS with a stack of server messages: one event per message, then `completed`.
    static func cpsStack(_ id: String, card: String, codes: [String]) -> InboundSpec {
        let stack = codes.map { #"{"code":"\#($0)","severity":"info"}"# }.joined(separator: ",")
        return InboundSpec(
            messageID: id, body: #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessages":[\#(stack)]}"#,
            expectedResults: codes.count + 1)
    }

    /// TNS, with an embedded record when `record` is given: one `transactionRecords` result.
    static func tns(_ id: String, card: String, record: (id: String, date: String, amount: Double)? = nil)
        -> InboundSpec
    {
        var body = #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)""#
        if let record {
            body +=
                #","transaction":{"id":"\#(record.id)","date":"\#(record.date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(record.amount),"merchantName":"Cafe"}"#
        }
        body += "}"
        return InboundSpec(messageID: id, body: body, expectedResults: 1)
    }

    /// MG: one `replenishmentOutcome`.
    static func mg(_ id: String, card: String) -> InboundSpec {
        InboundSpec(
            messageID: id,
            body: #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#,
            expectedResults: 1)
    }

    /// A non-SDK notification with an action: one `actionTriggered`.
    static func action(_ id: String, action: String) -> InboundSpec {
        InboundSpec(
            messageID: id, body: #"{"action":"\#(action)","aps":{"content-available":1}}"#, expectedResults: 1)
    }
}

// MARK: - Results

extension CapturedMessage {
    /// `<inbound message_id>` of a result id `<inbound message_id>/<n>`.
    var inboundID: String? {
        guard let messageID, let slash = messageID.lastIndex(of: "/") else { return nil }
        return String(messageID[..<slash])
    }

    var jsonObject: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
}

/// The result ids missing or unexpected for `inbound`, given what each message should publish.
struct ResultAccounting {
    /// Inbound messages with fewer results than expected (id, expected, distinct found).
    var incomplete: [(String, Int, Int)] = []
    /// Result ids that no inbound message (or no index below its expected count) explains.
    var unexpected: [String] = []
    /// Result ids seen more than once whose copies differ (id, distinct bodies).
    var differingDuplicates: [(String, [String])] = []
    /// Results delivered more than once (all copies identical).
    var identicalDuplicates = 0
    /// Distinct result ids by inbound message id.
    var distinctByInbound: [String: Set<String>] = [:]

    init(results: [CapturedMessage], inbound: [InboundSpec], considering processed: Set<String>? = nil) {
        var bodies: [String: [[UInt8]]] = [:]
        var keys: [String: Set<String>] = [:]
        for result in results {
            guard let id = result.messageID else {
                unexpected.append("(no message_id) \(result.text.prefix(120))")
                continue
            }
            bodies[id, default: []].append(result.body)
            keys[id, default: []].insert(result.routingKey)
        }
        let expected = Dictionary(uniqueKeysWithValues: inbound.map { ($0.id, $0.expectedResults) })
        for (id, copies) in bodies {
            let distinct = Set(copies)
            if distinct.count > 1 || (keys[id]?.count ?? 0) > 1 {
                differingDuplicates.append((id, distinct.map { String(decoding: $0, as: UTF8.self) }))
            } else if copies.count > 1 {
                identicalDuplicates += copies.count - 1
            }
            guard let slash = id.lastIndex(of: "/"), let index = Int(id[id.index(after: slash)...]) else {
                unexpected.append(id)
                continue
            }
            let inboundID = String(id[..<slash])
            guard let count = expected[inboundID], index < count else {
                unexpected.append(id)
                continue
            }
            distinctByInbound[inboundID, default: []].insert(id)
        }
        for message in inbound where processed.map({ $0.contains(message.id) }) ?? true {
            let found = distinctByInbound[message.id]?.count ?? 0
            if found != message.expectedResults {
                incomplete.append((message.id, message.expectedResults, found))
            }
        }
    }
}

// MARK: - Running the worker

/// `wallet-worker run` arguments for a test's topology: JSON logs, an ephemeral operations port on loopback.
func workerRunArguments(
    _ topology: ResilienceTopology, store: String, prefetch: Int = 200, retryDelay: String = "200ms",
    extra: [String] = []
) -> [String] {
    [
        "run", "--store", store, "--prefetch", "\(prefetch)", "--http-port", "0", "--http-host", "127.0.0.1",
        "--log-format", "json", "--log-level", "info", "--retry-delay", retryDelay, "--shutdown-grace", "25s",
    ]
        + topology.flags + extra
}

/// `wallet-worker ARGUMENTS` started and ready (`/readyz` 200), with its operations port; killed (its log removed)
/// when it does not get there. The caller kills it.
func startReadyWorker(
    _ arguments: [String], amqpURL: String = TestBroker.urlText, label: String, readyWithin: Duration = .seconds(30)
) async throws -> (worker: WorkerProcess, port: Int) {
    let worker = try WorkerProcess(arguments, amqpURL: amqpURL, label: label)
    do {
        let port = try await worker.operationsPort()
        try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: readyWithin)
        return (worker, port)
    } catch {
        worker.kill()
        worker.process.removeLog()
        throw error
    }
}

/// A worker on the SQLite store `database` that gives up on a message after one attempt and waits 50 ms for the
/// store's lock: while another process holds that lock, every message it takes is dead-lettered as a store failure.
/// Ready (`/readyz` 200) when returned; the caller kills it.
func startOneAttemptWorker(_ topology: ResilienceTopology, database: String, label: String) async throws
    -> WorkerProcess
{
    try await startReadyWorker(
        workerRunArguments(
            topology, store: "sqlite:\(database)", prefetch: 50,
            // Every message refused at once would pause it (`ResultsPauseTests`): the dead letters are the point.
            extra: [
                "--store-busy-timeout", "50ms", "--retry-attempts", "1", "--results-pause-quiet-activation", "0",
            ]),
        label: label
    ).worker
}

/// Publishes `notifications` (with confirms on `channel`) while their results cannot be routed (the capture queue is
/// unbound from the result exchanges: the broker returns the `mandatory` results, a transient failure of the
/// messages' own), and waits until `worker` has dead-lettered all of them into the topology's empty dead-letter
/// queue; the capture queue is bound again before it returns. (A store that is out no longer dead-letters anything:
/// the worker holds its batches, `DeliveryLifecycle`.)
func deadLetterAsTransientFailures(
    _ notifications: [InboundSpec], topology: ResilienceTopology, connection: AMQPConnection,
    channel: AMQPChannel, worker: WorkerProcess
) async throws {
    try await topology.unbindCapture(on: channel)
    do {
        try await publishConfirmed(notifications.map { $0.outbound(to: topology.inbound) }, on: channel)
        try await waitUntil(
            "the transient failures to be dead-lettered\n\(worker.logTail())"
        ) {
            try await readyCount(topology.deadLetterQueue, on: connection) == notifications.count
        }
    } catch {
        try? await topology.bindCapture(on: channel)
        throw error
    }
    try await topology.bindCapture(on: channel)
}

/// `wallet-worker ARGUMENTS` (not `run`) to its end: its exit and output (stdout and stderr, in one log).
func walletWorkerCommand(
    _ arguments: [String], environment: [String: String] = ["AMQP_URL": TestBroker.urlText], input: String? = nil,
    timeout: Duration = .seconds(60)
) async throws -> (exit: ChildExit, output: String) {
    let process = try ChildProcess(
        executable: try WorkerProcess.executablePath, arguments: arguments, environment: environment,
        label: "command-" + arguments.prefix(2).joined(separator: "-").filter { $0.isLetter || $0 == "-" },
        pipeStandardInput: true)
    defer {
        process.kill()
        process.removeLog()
    }
    if let input { try process.write(toStandardInput: input) }
    process.closeStandardInput()
    guard let (exit, _) = await process.waitForExit(timeout: timeout) else {
        throw ChildProcessError("wallet-worker \(arguments) did not finish\n\(process.logTail())")
    }
    return (exit, process.log)
}

/// The JSON objects of a command's output, one per line (progress and error lines on stderr are not JSON).
func jsonObjects(_ output: String) -> [[String: Any]] {
    output.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap {
        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
    }
}

/// A temporary SQLite path (the store creates the file), removed with its -wal and -shm by `removeSQLite`.
func temporarySQLitePath(_ purpose: String) -> String {
    ChildProcess.temporaryPath("\(purpose).sqlite")
}

func removeSQLite(_ path: String) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        try? FileManager.default.removeItem(atPath: path + suffix)
    }
}

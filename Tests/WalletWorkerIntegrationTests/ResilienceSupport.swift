import AMQPTransport
import Foundation
import Logging
import Synchronization
import Testing

// Helpers of the resilience suites (self-contained: nothing here depends on the other suites' fixtures).
// Every suite of this file's family nests in `Resilience`, which runs them one at a time: they start worker
// processes and move tens of thousands of messages, and the machine has two cores.

@Suite("Resilience", .serialized)
enum Resilience {}

enum ResilienceBroker {
    /// `AMQP_URL` (scripts/test.sh exports it), else the default local node.
    static var url: String {
        ProcessInfo.processInfo.environment["AMQP_URL"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
    }

    static let logger: Logger = {
        var logger = Logger(label: "resilience-tests")
        logger.logLevel = .warning
        return logger
    }()

    static func connect(url: String = url, purpose: String) async throws -> AMQPConnection {
        var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: url))
        configuration.connectionName = "resilience-tests: \(purpose)"
        configuration.connectTimeout = .seconds(5)
        configuration.rpcTimeout = .seconds(15)
        do {
            return try await AMQPConnection.connect(configuration: configuration, logger: logger)
        } catch {
            throw ChildProcessError(
                "the resilience tests need RabbitMQ at \(url) (AMQP_URL; scripts/test.sh starts one): \(error)")
        }
    }

    /// The repository's root (for scripts/rabbitmq-local.sh).
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// A RabbitMQ node of the test's own (scripts/rabbitmq-local.sh on other ports, its own data directory), for
/// tests that stop and start the broker under the worker.
struct PrivateRabbitNode {
    let port: Int
    let dataDirectory: String
    /// The broker's `consumer_timeout`, checked every second; nil for RabbitMQ's default (30 minutes, checked every
    /// minute).
    var consumerTimeout: Duration?
    var url: String { "amqp://guest:guest@127.0.0.1:\(port)/%2f" }

    init(port: Int, consumerTimeout: Duration? = nil) {
        self.port = port
        self.consumerTimeout = consumerTimeout
        dataDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-resilience-rabbit-\(port)-\(UUID().uuidString.prefix(8))").path
    }

    private var environment: [String: String] {
        var environment = ["RABBITMQ_PORT": "\(port)", "RABBITMQ_DATA_DIR": dataDirectory]
        if let consumerTimeout { environment["RABBITMQ_CONSUMER_TIMEOUT_MS"] = "\(Int(consumerTimeout.inSeconds * 1_000))" }
        return environment
    }

    /// Runs the script and waits for exactly its process (the broker it leaves in the background writes to its
    /// own log file).
    func run(_ arguments: String..., timeout: Duration = .seconds(120)) async throws {
        try await runRepositoryScript("rabbitmq-local.sh", arguments, environment: environment, timeout: timeout)
    }

    func start() async throws { try await run("start") }
    func stop() async throws { try await run("stop") }

    /// Stops the node and removes its data; for `defer` (never throws).
    func destroy() {
        runRepositoryScriptBlocking("rabbitmq-local.sh", ["stop"], environment: environment)
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

/// Runs `scripts/NAME ARGUMENTS` with bash, waits for exactly its process (not for what it leaves in the
/// background), and returns its output (stdout and stderr); throws when it fails or outlasts `timeout`.
@discardableResult
func runRepositoryScript(
    _ name: String, _ arguments: [String], environment: [String: String], timeout: Duration
) async throws -> String {
    let script = ResilienceBroker.repositoryRoot.appendingPathComponent("scripts/\(name)").path
    let child = try ChildProcess(
        executable: "/bin/bash", arguments: [script] + arguments, environment: environment,
        label: "\(name)-\(arguments.prefix(2).joined(separator: "-"))")
    defer { child.kill(); child.removeLog() }
    guard let (exit, _) = await child.waitForExit(timeout: timeout) else {
        throw ChildProcessError("\(name) \(arguments) did not finish in \(timeout)\n\(child.logTail())")
    }
    guard exit == .exited(0) else {
        throw ChildProcessError("\(name) \(arguments) \(exit)\n\(child.logTail())")
    }
    return child.log
}

/// The same, blocking and ignoring the outcome: for a `defer`, which cannot await. It holds a thread of the shared
/// pool meanwhile, so a test that can await its clean-up does that first.
func runRepositoryScriptBlocking(_ name: String, _ arguments: [String], environment: [String: String]) {
    let script = ResilienceBroker.repositoryRoot.appendingPathComponent("scripts/\(name)").path
    guard let child = try? ChildProcess(
        executable: "/bin/bash", arguments: [script] + arguments, environment: environment,
        label: "\(name)-\(arguments.prefix(2).joined(separator: "-"))-blocking")
    else { return }
    var status: Int32 = 0
    while waitpid(child.pid, &status, 0) == -1 && errno == EINTR {}
    child.removeLog()
}

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
        prefix = "wnw-res.\(purpose).\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
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
        url: String = ResilienceBroker.url, retryDelay: String, extraFlags: [String] = [], on channel: AMQPChannel
    ) async throws {
        let declare = try WorkerProcess(
            ["declare"] + flags + ["--retry-delay", retryDelay, "--log-format", "json"] + extraFlags, amqpURL: url,
            label: "declare-\(prefix)")
        defer { declare.kill(); declare.process.removeLog() }
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

    /// Deletes every queue and exchange (missing ones are fine), on a fresh connection.
    func delete(url: String = ResilienceBroker.url) async {
        guard let connection = try? await ResilienceBroker.connect(url: url, purpose: "clean-up \(prefix)") else {
            return
        }
        // Every retry level (`<retry>.2`, … as RetrySchedule names them) a test's settings may have declared.
        for queue in [work, retry, deadLetterQueue, capture] + (2...12).map({ "\(retry).\($0)" }) {
            if let channel = try? await connection.openChannel() {
                _ = try? await channel.deleteQueue(queue)
                try? await channel.close()
            }
        }
        for exchange in resultExchanges + [inbound, deadLetterExchange, "\(deadLetterQueue).loop"] {
            if let channel = try? await connection.openChannel() {
                try? await channel.deleteExchange(exchange)
                try? await channel.close()
            }
        }
        await connection.close(timeout: .seconds(5))
    }
}

/// Runs `body` with a connection, a channel and a declared topology; deletes the topology and closes the
/// connection afterwards, also when `body` throws.
func withResilienceTopology<T>(
    _ purpose: String, url: String = ResilienceBroker.url, retryDelay: String = "200ms", declareFlags: [String] = [],
    _ body: (ResilienceTopology, AMQPConnection, AMQPChannel) async throws -> T
) async throws -> T {
    let topology = ResilienceTopology(purpose)
    let connection = try await ResilienceBroker.connect(url: url, purpose: purpose)
    let result: Result<T, any Error>
    do {
        let channel = try await connection.openChannel()
        try await topology.declare(url: url, retryDelay: retryDelay, extraFlags: declareFlags, on: channel)
        result = .success(try await body(topology, connection, channel))
    } catch {
        result = .failure(error)
    }
    await connection.close(timeout: .seconds(5))
    await topology.delete(url: url)
    return try result.get()
}

// MARK: - Inbound messages

/// One inbound message and how many results the contract says it publishes.
struct InboundNotification: Sendable {
    var messageID: String
    var body: String
    var expectedResults: Int
    var type: String? = nil

    func outbound(to exchange: String, routingKey: String = "wallet.notification") -> AMQPOutboundMessage {
        AMQPOutboundMessage(
            exchange: exchange, routingKey: routingKey, body: Array(body.utf8),
            properties: AMQPMessageProperties(
                contentType: "application/json", deliveryMode: .persistent, messageID: messageID, type: type),
            mandatory: true)
    }

    /// CPS with one server message: a `serverMessage` event and `completed` (or one `errorEncountered`).
    static func cps(_ id: String, card: String, code: String) -> InboundNotification {
        InboundNotification(
            messageID: id,
            body: #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)","serverMessage":{"code":"\#(code)","text":"t","severity":"info"}}"#,
            expectedResults: 2)
    }

    /// CPS with a stack of server messages: one event per message, then `completed`.
    static func cpsStack(_ id: String, card: String, codes: [String]) -> InboundNotification {
        let stack = codes.map { #"{"code":"\#($0)","severity":"info"}"# }.joined(separator: ",")
        return InboundNotification(
            messageID: id, body: #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessages":[\#(stack)]}"#,
            expectedResults: codes.count + 1)
    }

    /// TNS, with an embedded record when `record` is given: one `transactionRecords` result.
    static func tns(_ id: String, card: String, record: (id: String, date: String, amount: Double)? = nil)
        -> InboundNotification
    {
        var body = #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)""#
        if let record {
            body += #","transaction":{"id":"\#(record.id)","date":"\#(record.date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(record.amount),"merchantName":"Cafe"}"#
        }
        body += "}"
        return InboundNotification(messageID: id, body: body, expectedResults: 1)
    }

    /// MG: one `replenishmentOutcome`.
    static func mg(_ id: String, card: String) -> InboundNotification {
        InboundNotification(
            messageID: id,
            body: #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#,
            expectedResults: 1)
    }

    /// A non-SDK notification with an action: one `actionTriggered`.
    static func action(_ id: String, action: String) -> InboundNotification {
        InboundNotification(
            messageID: id, body: #"{"action":"\#(action)","aps":{"content-available":1}}"#, expectedResults: 1)
    }
}

/// Publishes with confirms, in chunks; every message must be confirmed.
func publishAll(_ messages: [AMQPOutboundMessage], on channel: AMQPChannel, chunk: Int = 1_000) async throws {
    var offset = 0
    while offset < messages.count {
        let slice = Array(messages[offset..<min(offset + chunk, messages.count)])
        let outcomes = try await channel.publish(slice, confirmTimeout: .seconds(30))
        let failed = outcomes.filter { !$0.isConfirmed }
        try #require(failed.isEmpty, "inbound publishes not confirmed: \(failed.prefix(3))")
        offset += slice.count
    }
}

// MARK: - Results

/// A result as the capture queue received it.
struct CapturedResult: Sendable {
    var messageID: String?
    var exchange: String
    var routingKey: String
    var body: [UInt8]
    var headers: AMQPTable?

    var text: String { String(decoding: body, as: UTF8.self) }

    /// `<inbound message_id>` of a result id `<inbound message_id>/<n>`.
    var inboundID: String? {
        guard let messageID, let slash = messageID.lastIndex(of: "/") else { return nil }
        return String(messageID[..<slash])
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
}

/// Messages ready in a queue (passive declare on a fresh channel).
func readyCount(_ queue: String, on connection: AMQPConnection) async throws -> Int {
    let channel = try await connection.openChannel()
    let status = try await channel.queueStatus(queue)
    try? await channel.close()
    return Int(status.messageCount)
}

/// Consumes (and acknowledges) every message ready in `queue` until it has been empty for `quiet`; returns
/// them in order.
func drainQueue(
    _ queue: String, on connection: AMQPConnection, quiet: Duration = .milliseconds(500), limit: Duration = .seconds(60)
) async throws -> [AMQPDelivery] {
    let channel = try await connection.openChannel()
    try await channel.setPrefetch(count: 2_000)
    let consumer = try await channel.consume(queue: queue)
    let collected = Mutex<[AMQPDelivery]>([])
    let lastArrival = Mutex(ContinuousClock.now)
    let reader = Task {
        for try await batch in consumer {
            collected.withLock { $0 += batch }
            lastArrival.withLock { $0 = .now }
            if let last = batch.last { try await channel.ack(last, multiple: true) }
        }
    }
    let started = ContinuousClock.now
    while true {
        try await Task.sleep(for: .milliseconds(100))
        let idle = ContinuousClock.now - lastArrival.withLock { $0 }
        if idle >= quiet, (try? await channel.queueStatus(queue).messageCount) == 0 { break }
        if ContinuousClock.now - started > limit {
            throw ChildProcessError("draining \(queue) did not finish within \(limit)")
        }
    }
    try? await channel.cancel(consumerTag: consumer.tag)
    reader.cancel()
    _ = await reader.result
    try? await channel.close()
    return collected.withLock { $0 }
}

func capturedResults(_ deliveries: [AMQPDelivery]) -> [CapturedResult] {
    deliveries.map {
        CapturedResult(
            messageID: $0.properties.messageID, exchange: $0.exchange, routingKey: $0.routingKey, body: $0.body,
            headers: $0.properties.headers)
    }
}

/// Polls `condition` until it holds; false after `timeout`.
func eventually(
    timeout: Duration, every interval: Duration = .milliseconds(100), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let start = clock.now
    while clock.now - start < timeout {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
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

    init(results: [CapturedResult], inbound: [InboundNotification], considering processed: Set<String>? = nil) {
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
        let expected = Dictionary(uniqueKeysWithValues: inbound.map { ($0.messageID, $0.expectedResults) })
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
        for message in inbound where processed.map({ $0.contains(message.messageID) }) ?? true {
            let found = distinctByInbound[message.messageID]?.count ?? 0
            if found != message.expectedResults {
                incomplete.append((message.messageID, message.expectedResults, found))
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
    ["run", "--store", store, "--prefetch", "\(prefetch)", "--http-port", "0", "--http-host", "127.0.0.1",
     "--log-format", "json", "--log-level", "info", "--retry-delay", retryDelay, "--shutdown-grace", "25s"]
        + topology.flags + extra
}

/// A worker on the SQLite store `database` that gives up on a message after one attempt and waits 50 ms for the
/// store's lock: while another process holds that lock, every message it takes is dead-lettered as a store failure.
/// Ready (`/readyz` 200) when returned; the caller kills it.
func startOneAttemptWorker(_ topology: ResilienceTopology, database: String, label: String) async throws -> WorkerProcess {
    let worker = try WorkerProcess(
        workerRunArguments(
            topology, store: "sqlite:\(database)", prefetch: 50,
            extra: ["--store-busy-timeout", "50ms", "--retry-attempts", "1"]),
        amqpURL: ResilienceBroker.url, label: label)
    do {
        let port = try await worker.operationsPort()
        try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
        return worker
    } catch {
        worker.kill()
        worker.process.removeLog()
        throw error
    }
}

/// Publishes `notifications` (with confirms on `channel`) while their results cannot be routed (the capture queue is
/// unbound from the result exchanges: the broker returns the `mandatory` results, a transient failure of the
/// messages' own), and waits until `worker` has dead-lettered all of them into the topology's empty dead-letter
/// queue; the capture queue is bound again before it returns. (A store that is out no longer dead-letters anything:
/// the worker holds its batches, `DeliveryLifecycle`.)
func deadLetterAsTransientFailures(
    _ notifications: [InboundNotification], topology: ResilienceTopology, connection: AMQPConnection,
    channel: AMQPChannel, worker: WorkerProcess
) async throws {
    try await topology.unbindCapture(on: channel)
    let failed: Bool
    do {
        try await publishAll(notifications.map { $0.outbound(to: topology.inbound) }, on: channel)
        failed = try await eventually(timeout: .seconds(30), every: .milliseconds(100)) {
            try await readyCount(topology.deadLetterQueue, on: connection) == notifications.count
        }
    } catch {
        try? await topology.bindCapture(on: channel)
        throw error
    }
    try await topology.bindCapture(on: channel)
    try #require(failed, "the transient failures were not dead-lettered\n\(worker.logTail())")
}

/// `wallet-worker ARGUMENTS` (not `run`) to its end: its exit and output (stdout and stderr, in one log).
func walletWorkerCommand(
    _ arguments: [String], environment: [String: String] = ["AMQP_URL": ResilienceBroker.url], input: String? = nil,
    timeout: Duration = .seconds(60)
) async throws -> (exit: ChildExit, output: String) {
    let process = try ChildProcess(
        executable: try WorkerProcess.executablePath, arguments: arguments, environment: environment,
        label: "command-" + arguments.prefix(2).joined(separator: "-").filter { $0.isLetter || $0 == "-" },
        pipeStandardInput: true)
    defer { process.kill(); process.removeLog() }
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

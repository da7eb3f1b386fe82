// Shared helpers of the worker's integration tests: the worker's topology per test, an in-process worker, capture of
// results and dead letters, publishing to the inbound exchange, clean-up, and `wallet-worker route`. The broker
// connection, the session that deletes a test's queues and exchanges, queue capture and `eventually` are
// BrokerTestSupport's.
import AMQPTransport
import BrokerTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing
import WalletRouting
import WalletStore
import WalletWorker

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// MARK: - The topology

extension Topology {
    /// Every name of CONTRACT.md §1 under `prefix`, so tests running at once never share a queue or exchange.
    static func unique(prefix: String) -> Topology {
        var topology = Topology()
        topology.inboundExchange = "\(prefix).notifications"
        topology.workQueue = "\(prefix).notifications.work"
        topology.retryQueue = "\(prefix).notifications.retry"
        topology.deadLetterExchange = "\(prefix).notifications.dlx"
        topology.deadLetterQueue = "\(prefix).notifications.dead"
        topology.resultExchanges.events = "\(prefix).events"
        topology.resultExchanges.transactions = "\(prefix).transactions"
        topology.resultExchanges.replenishment = "\(prefix).replenishment"
        topology.resultExchanges.actions = "\(prefix).actions"
        topology.resultExchanges.installations = "\(prefix).installations"
        return topology
    }

    var allResultExchanges: [String] {
        [
            resultExchanges.events, resultExchanges.transactions, resultExchanges.replenishment,
            resultExchanges.actions, resultExchanges.installations,
        ]
    }
}

// MARK: - One test's environment

/// One test's topology, connection and captures; `withWorkerEnvironment` removes all of it at the end.
final class WorkerEnvironment: @unchecked Sendable {
    let prefix: String
    var configuration: WorkerConfiguration
    /// The test's connection and channel (for status checks and declarations); it deletes what the test owns.
    let session: BrokerSession
    /// Confirm-mode channel for publishing inbound messages.
    let publishChannel: AMQPChannel
    private let owned = Mutex<(workers: [RunningWorker], captures: [MessageCapture])>(([], []))

    var topology: Topology { configuration.topology }
    var connection: AMQPConnection { session.connection }
    var channel: AMQPChannel { session.channel }

    fileprivate init(
        prefix: String, configuration: WorkerConfiguration, session: BrokerSession,
        publishChannel: AMQPChannel
    ) {
        self.prefix = prefix
        self.configuration = configuration
        self.session = session
        self.publishChannel = publishChannel
    }

    /// Declares the worker's topology (as the worker does at start), so captures can be bound before it runs.
    func declareTopology() async throws {
        try await TopologyDeclaration.declare(configuration: configuration, logger: RunningWorker.logger)
    }

    /// Starts an in-process worker with this environment's configuration and waits until it consumes. The default
    /// wait is generous: the start is not what these tests check, and when every suite starts at once on two
    /// cores (with a broker and the private nodes of other suites) a start took over 20 s in CI, and a suite of
    /// four such tests 43 s in a later full run.
    func startWorker(readyWithin limit: Duration = .seconds(120), logger: Logger = RunningWorker.logger)
        async throws -> RunningWorker
    {
        let worker = try RunningWorker(configuration: configuration, logger: logger)
        owned.withLock { $0.workers.append(worker) }
        try await worker.waitUntilReady(within: limit)
        return worker
    }

    /// A capture queue bound with `#` to each of the five result exchanges (declared first when needed), and
    /// reply queues with the given names for `reply_to` copies.
    func resultCapture(replyQueues: [String] = []) async throws -> ResultCapture {
        let results = "\(prefix).capture"
        try await channel.declareQueue(results, durable: false, exclusive: true)
        for exchange in topology.allResultExchanges {
            try await channel.declareExchange(exchange, type: "topic")
            try await channel.bindQueue(results, exchange: exchange, routingKey: "#")
        }
        session.own(queue: results)
        let capture = try await collect(queue: results)
        var replies: [String: MessageCapture] = [:]
        for name in Set(replyQueues) {
            try await channel.declareQueue(name, durable: false, exclusive: true)
            session.own(queue: name)
            replies[name] = try await collect(queue: name)
        }
        return ResultCapture(results: capture, replies: replies)
    }

    /// Reads the test's dead-letter queue (declared by the topology).
    func deadLetterReader() async throws -> MessageCapture {
        // As the worker declares it (its loop, and for quorum its arguments): idempotent, and creates it if need be.
        try await declareTopology()
        return try await collect(queue: topology.deadLetterQueue)
    }

    /// Consumes `queue` in the background on a channel of its own, acknowledging what it collects.
    func collect(
        queue: String, acknowledgement: AMQPConsumer.Acknowledgement = .manual
    ) async throws -> MessageCapture {
        let capture = try await MessageCapture.start(queue: queue, on: connection, acknowledgement: acknowledgement)
        owned.withLock { $0.captures.append(capture) }
        return capture
    }

    /// Publishes inbound messages to the inbound exchange with confirms; every one must be confirmed (routed).
    func publish(_ messages: [InboundSpec]) async throws {
        try await publishConfirmed(messages.map { $0.outbound(to: topology.inboundExchange) }, on: publishChannel)
    }

    func publish(_ message: InboundSpec) async throws {
        try await publish([message])
    }

    /// Ready messages in a queue (unacknowledged ones are not counted; stop the worker first to count them too).
    func messageCount(_ queue: String) async throws -> UInt32 {
        try await channel.queueStatus(queue).messageCount
    }

    /// Stops workers and captures, and hands every queue and exchange of the test's topology to the session, which
    /// deletes them.
    fileprivate func tearDown() async throws {
        let (workers, captures) = owned.withLock { ($0.workers, $0.captures) }
        var firstError: (any Error)?
        for worker in workers {
            do { try await worker.stop() } catch { firstError = firstError ?? error }
        }
        for capture in captures { await capture.stop() }
        let topology = topology
        // Every retry level a test's settings may have declared (deleting a missing queue is fine).
        let retryQueues = ([topology.retryQueue] + (topology.sharded?.retryQueues ?? [])).flatMap { base in
            (1...12).map { RetrySchedule.queue(base, level: $0) }
        }
        session.own(
            queues: [topology.workQueue, topology.deadLetterQueue] + retryQueues + (topology.sharded?.queues ?? []))
        session.own(
            exchanges: [topology.inboundExchange, topology.deadLetterExchange] + topology.allResultExchanges
                + (topology.sharded.map { [$0.hashExchange] } ?? []))
        if let firstError { throw firstError }
    }
}

/// Runs `body` with a fresh environment: unique topology names (memory store, no HTTP port, `configure` applied),
/// a test session with a confirm-mode publish channel. Afterwards stops the workers it started and deletes the
/// test's queues and exchanges, also when `body` throws.
func withWorkerEnvironment<T>(
    _ purpose: String,
    brokerURL: String = TestBroker.urlText,
    configure: (inout WorkerConfiguration) -> Void = { _ in },
    _ body: (WorkerEnvironment) async throws -> T
) async throws -> T {
    let prefix = uniqueName(purpose)
    var configuration = WorkerConfiguration()
    configuration.amqpURL = brokerURL
    configuration.topology = .unique(prefix: prefix)
    configuration.store = .memory
    configuration.httpPort = nil
    configuration.logLevel = .error
    configure(&configuration)
    return try await withBrokerSession(purpose, url: brokerURL) { session in
        let publishChannel = try await session.connection.openChannel()
        try await publishChannel.enableConfirms()
        let environment = WorkerEnvironment(
            prefix: prefix, configuration: configuration, session: session, publishChannel: publishChannel)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(environment))
        } catch {
            result = .failure(error)
        }
        let stopped: Result<Void, any Error>
        do {
            try await environment.tearDown()
            stopped = .success(())
        } catch {
            stopped = .failure(error)
        }
        let value = try result.get()
        try stopped.get()
        return value
    }
}

// MARK: - The worker in-process

/// A `WorkerApplication` running in this process until `stop()`.
final class RunningWorker: Sendable {
    /// The worker under test logs errors only: rejected messages are expected here and logged at warning.
    static let logger: Logger = {
        var logger = Logger(label: "wallet-worker-under-test")
        logger.logLevel = .error
        return logger
    }()

    let application: WorkerApplication
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let stopped = Mutex(false)

    init(configuration: WorkerConfiguration, logger: Logger = RunningWorker.logger) throws {
        application = try WorkerApplication.build(configuration: configuration, logger: logger)
        let group = application.serviceGroup(signals: [])
        self.group = group
        task = Task { try await group.run() }
    }

    var health: WorkerHealth { application.health }

    /// A metric's value in the worker's Prometheus exposition, summed over the series matching `labels`.
    func metric(_ name: String, labels: [String] = []) -> Double {
        metricValue(
            in: String(decoding: application.metrics.exposition(), as: UTF8.self), name, labels: labels)
    }

    func waitUntilReady(within limit: Duration) async throws {
        try await eventually("the worker to be ready (consuming)", within: limit, every: .milliseconds(5)) {
            if !application.health.isLive {
                try await task.value
                throw BrokerTestError("the worker failed before it was ready")
            }
            return application.health.isReady
        }
    }

    /// Graceful shutdown: the worker finishes and acknowledges what it holds, then the group returns.
    func stop() async throws {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        await group.triggerGracefulShutdown()
        try await task.value
    }
}

// MARK: - Capturing results

/// The results the worker publishes: one capture queue bound with `#` to all five result exchanges (so their
/// publication order is kept), and one queue per `reply_to` name for the copies.
struct ResultCapture: Sendable {
    let results: MessageCapture
    let replies: [String: MessageCapture]

    func replyQueue(_ name: String) throws -> MessageCapture {
        guard let queue = replies[name] else { throw BrokerTestError("no reply queue '\(name)' was created") }
        return queue
    }
}

// MARK: - Inbound messages

/// An inbound message as the backend publishes it, and (for the resilience checks) how many results the contract
/// says it publishes.
struct InboundSpec: Sendable {
    var body: [UInt8]
    var messageID: String?
    var correlationID: String?
    var replyTo: String?
    var type: String?
    var traceparent: String?
    var timestamp: UInt64?
    /// Extra headers (kept on dead letters).
    var headers: [(String, AMQPFieldValue)] = []
    var routingKey = "wallet.notification"
    var expectedResults = 0

    init(
        body: [UInt8], messageID: String? = nil, correlationID: String? = nil, replyTo: String? = nil,
        type: String? = nil, traceparent: String? = nil, timestamp: UInt64? = nil,
        headers: [(String, AMQPFieldValue)] = [], expectedResults: Int = 0
    ) {
        self.body = body
        self.expectedResults = expectedResults
        self.messageID = messageID
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.type = type
        self.traceparent = traceparent
        self.timestamp = timestamp
        self.headers = headers
    }

    init(
        json: String, messageID: String? = nil, correlationID: String? = nil, replyTo: String? = nil,
        type: String? = nil, traceparent: String? = nil
    ) {
        self.init(
            body: Array(json.utf8), messageID: messageID, correlationID: correlationID, replyTo: replyTo,
            type: type, traceparent: traceparent)
    }

    /// The message `wallet-worker route` would read from the same properties (`RouteLines.message`).
    init(_ message: InboundMessage, headers: [(String, AMQPFieldValue)] = []) {
        self.init(
            body: message.body, messageID: message.properties.messageID,
            correlationID: message.properties.correlationID, replyTo: message.properties.replyTo,
            type: message.properties.type, traceparent: message.properties.traceparent,
            timestamp: message.properties.timestamp.map { UInt64(clamping: $0) }, headers: headers)
    }

    var amqpProperties: AMQPMessageProperties {
        var table = AMQPTable()
        if let traceparent { table["traceparent"] = .string(traceparent) }
        for (key, value) in headers { table[key] = value }
        return AMQPMessageProperties(
            contentType: "application/json", headers: table.isEmpty ? nil : table, deliveryMode: .persistent,
            correlationID: correlationID, replyTo: replyTo, messageID: messageID, timestamp: timestamp, type: type)
    }

    /// The message id, "" when there is none.
    var id: String { messageID ?? "" }
    var text: String {
        get { String(decoding: body, as: UTF8.self) }
        set { body = Array(newValue.utf8) }
    }

    func outbound(to exchange: String, routingKey: String? = nil) -> AMQPOutboundMessage {
        AMQPOutboundMessage(
            exchange: exchange, routingKey: routingKey ?? self.routingKey, body: body, properties: amqpProperties,
            mandatory: true)
    }
}

// MARK: - `wallet-worker route` as a subprocess

/// Runs the `wallet-worker` executable built next to the test bundle (`WorkerProcess.executablePath`).
enum RouteCommand {
    /// Feeds `lines` to `wallet-worker route --store memory` (one fresh store for all of them) and returns its
    /// output lines. stdin and stdout are temporary files, so neither side can block on a full pipe.
    static func route(lines: [[UInt8]], extraArguments: [String] = []) async throws -> [[UInt8]] {
        let executable = try WorkerProcess.executablePath
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-route-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("in.jsonl").path
        let output = directory.appendingPathComponent("out.jsonl").path
        let errors = directory.appendingPathComponent("err.txt").path
        var data = [UInt8]()
        for line in lines { data += line + [UInt8(ascii: "\n")] }
        try Data(data).write(to: URL(fileURLWithPath: input))

        let arguments = [executable, "route", "--store", "memory"] + extraArguments
        let status = try await spawnAndWait(arguments: arguments, stdin: input, stdout: output, stderr: errors)
        let stdout = try [UInt8](Data(contentsOf: URL(fileURLWithPath: output)))
        guard status == 0 else {
            let stderr = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw BrokerTestError(
                "wallet-worker route exited with status \(status): \(stderr)\nstdout: \(String(decoding: stdout, as: UTF8.self).prefix(2000))"
            )
        }
        return stdout.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).map(Array.init)
    }

    /// posix_spawn with the three standard streams redirected to files; waits on a thread of its own.
    static func spawnAndWait(arguments: [String], stdin: String, stdout: String, stderr: String) async throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw BrokerTestError("posix_spawn \(arguments[0]) failed: \(String(cString: strerror(spawned)))")
        }
        let child = pid
        let status: Int32 = await offThePool {
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            return status
        }
        // WIFEXITED / WEXITSTATUS by hand (the macros are not imported).
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }
}

/// One output line of `wallet-worker route`.
struct RoutedLine: Sendable {
    struct Result: Sendable {
        var exchange: String
        var routingKey: String
        var messageID: String?
        var correlationID: String?
        var type: String?
        var traceparent: String?
        var body: [UInt8]
    }

    var line: Int
    var disposition: String
    var reason: String?
    var outcome: String
    var replay: Bool
    var results: [Result]

    init(parsing bytes: [UInt8]) throws {
        guard let object = (try? JSONParser.parse(bytes))?.objectValue else {
            throw BrokerTestError(
                "route printed a line that is not a JSON object: \(String(decoding: bytes, as: UTF8.self))")
        }
        if let error = object["error"]?.stringValue {
            throw BrokerTestError("route could not read an input line: \(error)")
        }
        guard let disposition = object["disposition"]?.stringValue, let outcome = object["outcome"]?.stringValue,
            let results = object["results"]?.arrayValue
        else {
            throw BrokerTestError(
                "route line without disposition/outcome/results: \(String(decoding: bytes, as: UTF8.self))")
        }
        line = object["line"]?.numberValue?.intValue ?? 0
        self.disposition = disposition
        reason = object["reason"]?.stringValue
        self.outcome = outcome
        replay = object["replay"]?.boolValue ?? false
        self.results = try results.map { value in
            guard let result = value.objectValue, let exchange = result["exchange"]?.stringValue,
                let routingKey = result["routingKey"]?.stringValue, let body = result["body"]
            else { throw BrokerTestError("route result without exchange/routingKey/body: \(value)") }
            let properties = result["properties"]?.objectValue
            var writer = JSONWriter()
            writer.value(body)
            return Result(
                exchange: exchange, routingKey: routingKey, messageID: properties?["messageId"]?.stringValue,
                correlationID: properties?["correlationId"]?.stringValue, type: properties?["type"]?.stringValue,
                traceparent: properties?["traceparent"]?.stringValue, body: writer.takeBytes())
        }
    }
}

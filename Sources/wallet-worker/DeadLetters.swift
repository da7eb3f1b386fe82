import AMQPTransport
import ArgumentParser
import Foundation
import Logging
import WalletWorker

#if canImport(Glibc)
import Glibc
#endif

extension WalletWorkerCommand {
    /// The operator's view of `wallet.notifications.dead`: why each message is there, and putting back the ones
    /// whose cause is fixed.
    struct DeadLetters: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dead-letters",
            abstract: "List, show, replay or purge the messages in the dead-letter queue.",
            discussion: """
                Each command reads the messages the queue holds when it starts, once, without taking the ones it \
                does not act on: they go back to the queue in their order when it ends, also when it is \
                interrupted. The filters (--reason, --sender, --message-id, --older-than, --newer-than) all apply.

                \(ExitStatus.helpText) replay exits 1 when a replay was not confirmed, purge when it was not \
                confirmed; 2 when the broker cannot be reached or refuses the login.
                """,
            subcommands: [List.self, Show.self, Replay.self, Purge.self],
            defaultSubcommand: List.self)
    }
}

/// The filters every `dead-letters` command takes.
struct DeadLetterFilterOptions: ParsableArguments {
    @Option(help: "Only dead letters whose reason (x-worker-error, or the broker's) contains this text, case-insensitive")
    var reason: String?
    @Option(help: "Only notifications of this sender (CPS, TNS, MG, …)")
    var sender: String?
    @Option(help: "Only the message with this message_id")
    var messageId: String?
    @Option(help: "Only messages published at least this long ago, e.g. 30m")
    var olderThan: String?
    @Option(help: "Only messages published at most this long ago, e.g. 2h")
    var newerThan: String?

    func filter() throws -> DeadLetterFilter {
        var filter = DeadLetterFilter()
        filter.reason = reason
        filter.sender = sender
        filter.messageID = messageId
        filter.olderThan = try olderThan.map { try parsed($0, "--older-than") }
        filter.newerThan = try newerThan.map { try parsed($0, "--newer-than") }
        return filter
    }

    private func parsed(_ text: String, _ flag: String) throws -> Duration {
        guard let value = DurationText.parse(text) else {
            throw ValidationError("\(flag) \"\(text)\": expected a duration like 30m, 2h or 1.5s")
        }
        return value
    }
}

/// Runs `body` with the dead-letter queue, on a connection from the same flags and variables as `run`, and closes
/// that connection afterwards, also when `body` throws.
@discardableResult
private func withDeadLetters<T>(
    _ broker: BrokerOptions, _ body: (DeadLetterQueue, WorkerConfiguration) async throws -> T
) async throws -> T {
    var configuration = WorkerConfiguration()
    try broker.apply(to: &configuration)
    WorkerLogging.bootstrap(
        format: .text, level: .warning,
        secrets: SecretRedaction.of(configuration, environment: ProcessInfo.processInfo.environment))
    let queue: DeadLetterQueue
    do {
        queue = try await DeadLetterQueue.open(configuration: configuration, logger: Logger(label: "wallet-worker"))
    } catch {
        progressLine("wallet-worker dead-letters: \(error)")
        throw ExitCode(ExitStatus.of(error).rawValue)
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await body(queue, configuration))
    } catch {
        result = .failure(error)
    }
    await queue.close()
    return try result.get()
}

/// A table on a terminal, JSON lines otherwise or with `--json`.
private struct DeadLetterPrinter {
    var json: Bool
    let now = Date()
    var headerPrinted = false

    init(json: Bool) {
        self.json = json || isatty(STDOUT_FILENO) == 0
    }

    mutating func print(_ letter: DeadLetter) throws -> Bool {
        if json { return try printLine(letter.jsonLine(at: now)) }
        if !headerPrinted {
            headerPrinted = true
            guard try printLine(Self.row("AGE", "BY", "SENDER", "MESSAGE ID", "REASON")) else { return false }
        }
        let age = letter.age(at: now).map(Self.age) ?? "?"
        return try printLine(Self.row(
            age, letter.deadLetteredBy, letter.sender ?? "-", letter.messageID ?? "-", letter.reason))
    }

    static func row(_ age: String, _ by: String, _ sender: String, _ id: String, _ reason: String) -> String {
        func cell(_ text: String, _ width: Int) -> String {
            let cut = text.count > width ? String(text.prefix(width - 1)) + "…" : text
            return cut.padding(toLength: width, withPad: " ", startingAt: 0)
        }
        return "\(cell(age, 8)) \(cell(by, 7)) \(cell(sender, 7)) \(cell(id, 36)) \(reason.prefix(160))"
    }

    static func age(_ seconds: TimeInterval) -> String {
        switch seconds {
        case ..<120: "\(Int(seconds))s"
        case ..<7_200: "\(Int(seconds / 60))m"
        case ..<172_800: "\(Int(seconds / 3_600))h"
        default: "\(Int(seconds / 86_400))d"
        }
    }
}

extension WalletWorkerCommand.DeadLetters {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One line per dead letter: age, who dead-lettered it, sender, message id, reason.")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Flag(help: "JSON lines (the default when stdout is not a terminal)")
        var json = false

        func run() async throws {
            let filter = try filters.filter()
            var printer = DeadLetterPrinter(json: json)
            var matched = 0
            var reading = true
            let now = Date()
            try await withDeadLetters(broker) { queue, _ in
                let seen = try await queue.walk { batch in
                    for delivery in batch where reading {
                        let letter = DeadLetter(delivery)
                        guard filter.matches(letter, at: now) else { continue }
                        matched += 1
                        reading = try printer.print(letter)
                    }
                    return []
                }
                if reading { progressLine("\(matched) of \(seen) dead letters in \(queue.queue)") }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each matching dead letter whole, as a JSON line: routing key, properties, headers, body.")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions

        func run() async throws {
            let filter = try filters.filter()
            let now = Date()
            var reading = true
            try await withDeadLetters(broker) { queue, _ in
                try await queue.walk { batch in
                    for delivery in batch where reading && filter.matches(DeadLetter(delivery), at: now) {
                        reading = try printLine(DeadLetterDetail.jsonLine(delivery))
                    }
                    return []
                }
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish the matching dead letters to the inbound exchange again, as they were first published.",
            discussion: """
                Each goes to the inbound exchange with its original routing key, body and properties, without the \
                headers added on its way to the dead letters (x-retry-count, x-worker-*, x-death, …), with \
                publisher confirms; its dead letter is removed only after the broker confirmed the replay. \
                Without a filter every dead letter is replayed: give one (e.g. --reason "store unavailable").
                """)

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Flag(help: "Only list what would be replayed")
        var dryRun = false
        @Flag(help: "JSON lines for the replayed messages (the default when stdout is not a terminal)")
        var json = false

        func run() async throws {
            let filter = try filters.filter()
            var printer = DeadLetterPrinter(json: json)
            var printing = true
            let progress = try await withDeadLetters(broker) { queue, configuration in
                let replayer = DeadLetterReplayer(
                    queue: queue, inboundExchange: configuration.topology.inboundExchange, filter: filter)
                return try await replayer.run(dryRun: dryRun) { progress, letters in
                    for letter in letters where printing {
                        printing = (try? printer.print(letter)) ?? false
                    }
                    progressLine("\(dryRun ? "would replay" : "replayed") \(dryRun ? progress.selected : progress.replayed) "
                                 + "of \(progress.seen) read" + (progress.failed > 0 ? ", \(progress.failed) failed" : ""))
                }
            }
            if progress.failed > 0 {
                progressLine("\(progress.failed) replays were not confirmed (unroutable or refused): they are still dead letters")
                throw ExitCode.failure
            }
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete the matching dead letters (all of them without a filter).")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @Flag(help: "Do not ask for confirmation")
        var yes = false

        func run() async throws {
            let filter = try filters.filter()
            try await withDeadLetters(broker) { queue, _ in
                if !yes {
                    let what = filter.isEmpty ? "every message" : "the matching messages"
                    FileHandle.standardError.write(Data("Delete \(what) in \(queue.queue)? Type yes: ".utf8))
                    guard readLine()?.trimmingCharacters(in: .whitespaces).lowercased() == "yes" else {
                        progressLine("nothing deleted")
                        throw ExitCode.failure
                    }
                }
                if filter.isEmpty {
                    progressLine("deleted \(try await queue.purgeAll()) dead letters")
                    return
                }
                let now = Date()
                var deleted = 0
                let seen = try await queue.walk { batch in
                    let matching = batch.filter { filter.matches(DeadLetter($0), at: now) }
                    deleted += matching.count
                    return matching
                }
                progressLine("deleted \(deleted) of \(seen) dead letters")
            }
        }
    }
}

/// `show`'s JSON: the delivery whole; a body that is not UTF-8 in base64.
enum DeadLetterDetail {
    static func jsonLine(_ delivery: AMQPDelivery) -> String {
        var object: [String: Any] = ["routingKey": delivery.routingKey, "exchange": delivery.exchange]
        let properties = delivery.properties
        var described: [String: Any] = [:]
        described["messageId"] = properties.messageID
        described["correlationId"] = properties.correlationID
        described["type"] = properties.type
        described["replyTo"] = properties.replyTo
        described["contentType"] = properties.contentType
        described["expiration"] = properties.expiration
        described["timestamp"] = properties.timestamp
        described["appId"] = properties.appID
        described["userId"] = properties.userID
        object["properties"] = described
        if let headers = properties.headers {
            object["headers"] = Dictionary(headers.entries.map { ($0.key, json($0.value)) }, uniquingKeysWith: { first, _ in first })
        }
        if let text = String(validating: delivery.body, as: UTF8.self) {
            object["body"] = text
        } else {
            object["bodyBase64"] = Data(delivery.body).base64EncodedString()
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func json(_ value: AMQPFieldValue) -> Any {
        switch value {
        case .bool(let value): value
        case .int8(let value): Int(value)
        case .uint8(let value): Int(value)
        case .int16(let value): Int(value)
        case .uint16(let value): Int(value)
        case .int32(let value): Int(value)
        case .uint32(let value): Int(value)
        case .int64(let value): Int(value)
        case .uint64(let value): value <= UInt64(Int.max) ? Int(value) : "\(value)"
        case .float(let value): value.isFinite ? Double(value) : "\(value)"
        case .double(let value): value.isFinite ? value : "\(value)"
        case .decimal(let scale, let value): "\(value)e-\(scale)"
        case .string(let value): value
        case .bytes(let bytes): String(validating: bytes, as: UTF8.self) ?? Data(bytes).base64EncodedString()
        case .timestamp(let seconds): Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(.iso8601)
        case .array(let values): values.map(json)
        case .table(let table): Dictionary(table.entries.map { ($0.key, json($0.value)) }, uniquingKeysWith: { first, _ in first })
        case .void: NSNull()
        }
    }
}

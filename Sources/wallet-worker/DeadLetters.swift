import AMQPTransport
import ArgumentParser
import Foundation
import Logging
import WalletOperatorTools
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
                Each command walks the messages the queue holds when it starts, once, in order, a window at a time: \
                each message it does not remove goes back to the queue's tail whole (through the queue's loop), so \
                after a run the queue holds what it held, in the same order; an interrupted run leaves the rest in \
                place. The filters (--reason, --sender, --message-id, --older-than, --newer-than) all apply; --limit \
                acts on the first matching ones only (the walk still goes to the end, so the queue keeps its order). \
                On a terminal a progress line comes every few seconds on stderr (not with --json). SIGINT or \
                SIGTERM stops a run between two messages, with nothing half done: it prints its closing line and \
                exits 130 (a second one quits at once).

                \(ExitStatus.helpText) Every command exits 1 when no dead letter matched (as grep does: an empty \
                queue matches nothing, and a purge without a filter empties the queue and exits 0); replay also when \
                a replay was not confirmed or was refused, purge when the deletion was not confirmed; 2 when the \
                broker cannot be reached or refuses the login.
                """,
            subcommands: [List.self, Summary.self, Show.self, Replay.self, Purge.self],
            defaultSubcommand: List.self)
    }
}

/// The filters every `dead-letters` command takes.
struct DeadLetterFilterOptions: ParsableArguments {
    @Option(
        help:
            """
            Only dead letters whose recorded reason (x-worker-error, or the broker's x-death reason and \
            queue) contains this text, case-insensitive; the hint shown beside a broker's reason is not \
            matched
            """
    )
    var reason: String?
    @Option(help: "Only notifications of this sender (CPS, TNS, MG, …), case-insensitive")
    var sender: String?
    @Option(help: "Only the message with this message_id")
    var messageId: String?
    @Option(help: "Only messages published at least this long ago, e.g. 30m")
    var olderThan: String?
    @Option(help: "Only messages published at most this long ago, e.g. 2h")
    var newerThan: String?
    @Option(help: "At most this many: the first that match, in queue order")
    var limit: Int?

    /// No filter and no limit: the command is about every dead letter.
    var selectsEverything: Bool { get throws { try filter().isEmpty && limit == nil } }

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit \(limit): expected at least 1") }
    }

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
            throw ValidationError(
                "\(flag) \"\(text)\": expected a duration like 30m, 2h or 1.5s, \(DurationText.rangeDescription)")
        }
        return value
    }
}

/// How much of each dead letter the tool reads: the workers' body limit.
struct DeadLetterReadOptions: ParsableArguments {
    @Option(
        name: .customLong(Setting.maxBodyBytes.name),
        help: .init(
            Setting.maxBodyBytes.setting.help(
                summary: """
                    The workers' largest accepted body in bytes: the tool reads bodies up to twice this, as the worker \
                    does; larger ones are listed with their size, kept or purged, never shown or replayed
                    """,
                default: Setting.maxBodyBytes.defaultValue)))
    var maxBodyBytes: String?
    @OptionGroup var logging: ToolLoggingOptions

    var readLimit: Int {
        get throws {
            let limit =
                try setting(maxBodyBytes, Setting.maxBodyBytes) ?? WorkerConfiguration().routing.maximumBodyBytes
            return limit > Int.max / 2 ? Int.max : limit * 2
        }
    }
}

/// Runs a pass over the dead-letter queue, on connections from the same flags and variables as `run`: `report` sees
/// every message walked, until it returns false (the reader went away). SIGINT and SIGTERM stop it between two
/// messages (`InterruptionSignals`); with `progress`, on a terminal, a line on stderr every few seconds.
private func walkDeadLetters(
    _ broker: BrokerOptions, _ read: DeadLetterReadOptions, command: DeadLetterPass.Command,
    filters: DeadLetterFilterOptions, progress: Bool,
    report: @escaping (DeadLetterPass.Decision, DeadLetterMessage, DeadLetterQueue.Outcome) -> Bool
) async throws -> (DeadLetterRunSummary, String) {
    var configuration = WorkerConfiguration()
    try broker.apply(to: &configuration)
    try read.logging.bootstrap(redacting: configuration)
    let interruption = WalkInterruption()
    let queue = DeadLetterQueue(
        access: try DeadLetterQueueAccess(workers: configuration), logger: Logger(label: "wallet-worker"),
        maximumBodyBytes: try read.readLimit, interruption: interruption)
    // The dead-letter queue has the work queue's type (`Topology.deadLetterQueueArguments`).
    var pass = DeadLetterPass(
        command: command, filter: try filters.filter(), deadLetterQueue: queue.queue, markerID: UUID().uuidString,
        now: Date(), keepsByCopy: configuration.topology.workQueueType == .quorum)
    pass.limit = filters.limit
    var meter = progress && isatty(STDERR_FILENO) != 0 ? ProgressMeter() : nil
    var reading = true
    let signals = InterruptionSignals(interruption)
    defer { signals.cancel() }
    let summary = try await reachingTheBroker {
        try await queue.walk(pass) { decision, message, outcome in
            meter?.walked(selected: decision.selected)
            if reading { reading = report(decision, message, outcome) }
            return reading || meter != nil
        }
    }
    return (summary, queue.queue)
}

/// `body`, with a broker that cannot be reached or refuses the login said in one line and status 2.
private func reachingTheBroker<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as AMQPError where ExitStatus.of(error) == .unavailable {
        progressLine("wallet-worker dead-letters: \(error)")
        throw ExitCode(ExitStatus.unavailable.rawValue)
    }
}

/// A walk's progress for an operator at a terminal: how many it walked and selected, at most every few seconds.
private struct ProgressMeter {
    static let interval = Duration.seconds(3)
    let start = ContinuousClock.now
    var next = ContinuousClock.now + interval
    var walked = 0
    var selected = 0

    mutating func walked(selected isSelected: Bool) {
        walked += 1
        if isSelected { selected += 1 }
        // One clock read per message: a few nanoseconds beside a delivery.
        let now = ContinuousClock.now
        guard now >= next else { return }
        next = now + Self.interval
        let elapsed = DurationText.format(now - start)
        progressLine("… walked \(walked) dead letters, \(selected) selected, in \(elapsed)")
    }
}

/// The status after the closing line: 130 when interrupted, 1 when the filters matched no dead letter.
private func exitStatus(of summary: DeadLetterRunSummary) throws {
    if summary.interrupted { throw ExitCode(ExitStatus.interrupted.rawValue) }
    if summary.selected == 0 { throw ExitCode.failure }
}

/// Asks for `yes` on stdin; false (and a line saying nothing was done) otherwise.
private func confirmed(_ question: String) -> Bool {
    FileHandle.standardError.write(Data("\(question) Type yes: ".utf8))
    guard readLine()?.trimmingCharacters(in: .whitespaces).lowercased() == "yes" else {
        progressLine("nothing done")
        return false
    }
    return true
}

extension WalletWorkerCommand.DeadLetters {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One line per dead letter: age, who dead-lettered it, sender, message id, reason.")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @OptionGroup var read: DeadLetterReadOptions
        @Flag(help: "JSON lines (the default when stdout is not a terminal)")
        var json = false

        func run() async throws {
            var printer = DeadLetterPrinter(json: json)
            let (summary, queue) = try await walkDeadLetters(
                broker, read, command: .look, filters: filters, progress: !json
            ) { decision, _, _ in
                guard decision.selected, let letter = decision.letter else { return true }
                return (try? printer.print(letter)) ?? false
            }
            progressLine(summary.closingLine(queue: queue, verb: "listed", count: summary.selected))
            try exitStatus(of: summary)
        }
    }

    struct Summary: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The dead letters grouped by reason, sender and routing key: how many, the oldest, the newest.",
            discussion: """
                One row per group, the largest first, then the total; a count of the dead letters without an AMQP \
                timestamp (their age is when the broker dead-lettered them, or unknown). At most \
                \(DeadLetterGroups.defaultMaximumGroups) groups are shown; the rest are counted together. Reasons \
                longer than \(DeadLetterGroups.defaultMaximumReasonLength) characters are cut.
                """)

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @OptionGroup var read: DeadLetterReadOptions
        @Flag(help: "JSON lines, one per group then the total (the default when stdout is not a terminal)")
        var json = false

        func run() async throws {
            var groups = DeadLetterGroups()
            let (summary, queue) = try await walkDeadLetters(
                broker, read, command: .look, filters: filters, progress: !json
            ) { decision, _, _ in
                if decision.selected, let letter = decision.letter { groups.add(letter) }
                return true
            }
            let asJSON = json || isatty(STDOUT_FILENO) == 0
            for line in asJSON ? groups.jsonLines() : groups.tableLines(at: Date()) {
                guard try printLine(line) else { break }
            }
            progressLine(summary.closingLine(queue: queue, verb: "summarized", count: summary.selected))
            try exitStatus(of: summary)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each matching dead letter whole, as a JSON line: routing key, properties, headers, body.")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @OptionGroup var read: DeadLetterReadOptions
        @Flag(
            help:
                "Show a device installation's whole push channel (a device's push token); by default only its last four characters"
        )
        var showPushChannel = false

        func run() async throws {
            let (summary, queue) = try await walkDeadLetters(
                broker, read, command: .look, filters: filters, progress: false
            ) { decision, message, _ in
                guard decision.selected else { return true }
                return (try? printLine(DeadLetterDetail.jsonLine(message, showPushChannel: showPushChannel))) ?? false
            }
            progressLine(summary.closingLine(queue: queue, verb: "showed", count: summary.selected))
            try exitStatus(of: summary)
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish the matching dead letters to the inbound exchange again, as they were first published.",
            discussion: """
                Each goes to the inbound exchange with its original routing key, body and properties, without the \
                headers added on its way to the dead letters (x-retry-count, x-worker-*, x-death, …) and with a \
                user_id moved to x-original-user-id, with publisher confirms; its dead letter is removed as soon as \
                the broker confirmed its own replay. A dead letter the worker truncated (a body it did not read, \
                headers dropped to fit a frame) is not replayed unless --force. Without a filter or a limit every \
                dead letter is replayed: it asks first unless --yes. --limit replays a few first (e.g. --limit 10, \
                then watch the worker).
                """)

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @OptionGroup var read: DeadLetterReadOptions
        @Flag(help: "Only list what would be replayed")
        var dryRun = false
        @Flag(help: "Replay truncated dead letters too, as they are")
        var force = false
        @Flag(help: "Do not ask for confirmation when there is no filter")
        var yes = false
        @Flag(help: "JSON lines for the replayed messages (the default when stdout is not a terminal)")
        var json = false

        func run() async throws {
            if try filters.selectsEverything && !dryRun && !yes {
                guard confirmed("Replay every dead letter (no filter given)?") else { throw ExitCode.failure }
            }
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            var printer = DeadLetterPrinter(json: json)
            let command: DeadLetterPass.Command =
                dryRun
                ? .look
                : .replay(
                    inboundExchange: configuration.topology.inboundExchange,
                    ownQueues: configuration.topology.consumedQueueNames, force: force)
            var printing = true
            let (summary, queue) = try await walkDeadLetters(
                broker, read, command: command, filters: filters, progress: !json
            ) { decision, _, outcome in
                guard decision.selected, let letter = decision.letter else { return true }
                if let refusal = decision.refusal {
                    progressLine("not replayed: \(letter.messageID ?? "(no message_id)"): \(refusal)")
                }
                if case .replayFailed(let why) = outcome {
                    progressLine("replay failed: \(letter.messageID ?? "(no message_id)"): \(why)")
                }
                guard printing, decision.refusal == nil, dryRun || outcome == .replayed else { return true }
                printing = (try? printer.print(letter)) ?? false
                return true
            }
            progressLine(
                summary.closingLine(
                    queue: queue, verb: dryRun ? "would replay" : "replayed",
                    count: dryRun ? summary.selected - summary.refused : summary.replayed))
            try exitStatus(of: summary)
            // Refused (truncated without --force, a body not read): not everything asked for was replayed.
            if summary.failed > 0 || summary.stoppedEarly != nil || (!dryRun && summary.refused > 0) {
                throw ExitCode.failure
            }
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete the matching dead letters (all of them without a filter or a limit).")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var filters: DeadLetterFilterOptions
        @OptionGroup var read: DeadLetterReadOptions
        @Flag(help: "Do not ask for confirmation")
        var yes = false

        func run() async throws {
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            let everything = try filters.selectsEverything
            if !yes {
                let what = everything ? "every message" : "the matching messages"
                guard confirmed("Delete \(what) in \(configuration.topology.deadLetterQueue)?") else {
                    throw ExitCode.failure
                }
            }
            if everything {
                try read.logging.bootstrap(redacting: configuration)
                let queue = DeadLetterQueue(
                    access: try DeadLetterQueueAccess(workers: configuration), logger: Logger(label: "wallet-worker"),
                    maximumBodyBytes: try read.readLimit)
                let deleted = try await reachingTheBroker { try await queue.purgeAll() }
                progressLine("deleted \(deleted) dead letters")
                return
            }
            let (summary, queue) = try await walkDeadLetters(
                broker, read, command: .purge, filters: filters, progress: true
            ) { _, _, _ in true }
            progressLine(summary.closingLine(queue: queue, verb: "deleted", count: summary.removed))
            try exitStatus(of: summary)
        }
    }
}

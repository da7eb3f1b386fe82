import AMQPTransport
import ArgumentParser
import Foundation
import Logging
import Synchronization
import WalletOperatorTools
import WalletRouting
import WalletWorker

/// Publishes notifications to the worker's inbound exchange and prints the results the worker sends back.
@main
struct WalletNotify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wallet-notify",
        abstract: "Publish notifications to the worker's inbound exchange and print the results it sends back.",
        discussion: """
            Each input line is in `wallet-worker route`'s format: {"properties": {"messageId": ..., "type": ..., \
            "replyTo": ..., "correlationId": ..., "traceparent": ...}, "body": {...}} ("bodyText" for a raw string, \
            "bodyBase64" for raw bytes). Every message is published persistent, mandatory and confirmed, with a \
            message_id (the line's, else a generated one) and a timestamp; one whose body has a digitalCardId \
            carries it in the digitalCardId header too, as every publisher must for the ordered mode. A private \
            queue bound to the five result exchanges receives the results, as a downstream consumer's would; \
            those of the published messages are printed as JSON lines (exchange, routingKey, messageId, body) \
            until none has arrived for --wait. Messages that publish nothing (ignored ones) print nothing.

            Every option can be set by the environment variable its help names (a flag wins), or by a file named \
            by that variable with _FILE appended (AMQP_URL_FILE=/run/secrets/amqp-url).

            Exit status: 0 every message published and confirmed; 1 an input file could not be read, a line is \
            not a message, or the broker did not take a message (unroutable: is the worker's topology declared?); \
            2 the broker cannot be reached or refused the login or the vhost; 64 usage (a flag or value that does \
            not parse).
            """)

    @Argument(help: "Files of JSON lines to publish, in order; none (or -) reads stdin.")
    var files: [String] = []
    // The broker and the exchanges are the worker's settings (the settings table: same flags, variables, defaults).
    @Option(name: .customLong(Setting.amqpURL.name), help: .init(Setting.amqpURL.help))
    var amqpURL: String?
    @Option(name: .customLong(Setting.inboundExchange.name), help: .init(Setting.inboundExchange.help))
    var inboundExchange: String?
    @Option(help: "Routing key of every message (env WALLET_NOTIFY_ROUTING_KEY). Default: notification")
    var routingKey: String?
    @Option(help: "How long to wait for more results after the last one, e.g. 5s (env WALLET_NOTIFY_WAIT). Default: 5s")
    var wait: String?
    @Option(name: .customLong(Setting.eventsExchange.name), help: .init(Setting.eventsExchange.help))
    var eventsExchange: String?
    @Option(name: .customLong(Setting.transactionsExchange.name), help: .init(Setting.transactionsExchange.help))
    var transactionsExchange: String?
    @Option(name: .customLong(Setting.replenishmentExchange.name), help: .init(Setting.replenishmentExchange.help))
    var replenishmentExchange: String?
    @Option(name: .customLong(Setting.actionsExchange.name), help: .init(Setting.actionsExchange.help))
    var actionsExchange: String?
    @Option(name: .customLong(Setting.installationsExchange.name), help: .init(Setting.installationsExchange.help))
    var installationsExchange: String?

    func run() async throws {
        let defaults = WorkerConfiguration()
        let url = try Self.value(amqpURL, Setting.amqpURL) ?? defaults.amqpURL
        let parsedURL: AMQPURL
        do {
            parsedURL = try AMQPURL(parsing: url)
        } catch {
            throw ValidationError("\(error.message)")
        }
        let exchange = try Self.value(inboundExchange, Setting.inboundExchange) ?? defaults.topology.inboundExchange
        let key = try Self.text(routingKey, "--routing-key", "WALLET_NOTIFY_ROUTING_KEY") ?? "notification"
        let idle: Duration
        if let text = try Self.text(wait, "--wait", "WALLET_NOTIFY_WAIT") {
            guard let parsed = DurationText.parse(text) else {
                throw ValidationError("--wait / WALLET_NOTIFY_WAIT \"\(text)\": expected a duration like 5s")
            }
            idle = parsed
        } else {
            idle = .seconds(5)
        }
        let names = defaults.topology.resultExchanges
        let resultExchanges = [
            try Self.value(eventsExchange, Setting.eventsExchange) ?? names.events,
            try Self.value(transactionsExchange, Setting.transactionsExchange) ?? names.transactions,
            try Self.value(replenishmentExchange, Setting.replenishmentExchange) ?? names.replenishment,
            try Self.value(actionsExchange, Setting.actionsExchange) ?? names.actions,
            try Self.value(installationsExchange, Setting.installationsExchange) ?? names.installations,
        ]

        WorkerLogging.bootstrap(
            format: .text, level: .warning, secrets: SecretRedaction(SecretRedaction.passwords(inURL: url)))
        let logger = Logger(label: "wallet-notify")

        let messages: [InboundMessage]
        do {
            messages = try Self.readMessages(paths: files)
        } catch {
            Self.say("\(error)")
            throw ExitCode(ExitStatus.failure.rawValue)
        }
        let connection: AMQPConnection
        do {
            var configuration = AMQPConnectionConfiguration(url: parsedURL)
            configuration.connectionName = "wallet-notify"
            connection = try await AMQPConnection.connect(configuration: configuration, logger: logger)
        } catch {
            Self.say("\(error)")
            throw ExitCode(ExitStatus.of(error).rawValue)
        }
        var notTaken = 0
        do {
            let channel = try await connection.openChannel()
            let results = try await channel.declareQueue("", durable: false, exclusive: true, autoDelete: true).name
            for name in resultExchanges {
                try await channel.bindQueue(results, exchange: name, routingKey: "#")
            }
            try await channel.enableConfirms()
            let outbound = messages.enumerated().map { index, message in
                AMQPOutboundMessage(
                    exchange: exchange,
                    routingKey: key,
                    body: message.body,
                    properties: AMQPMessageProperties(
                        contentType: "application/json",
                        headers: Self.headers(of: message),
                        deliveryMode: .persistent,
                        correlationID: message.properties.correlationID,
                        replyTo: message.properties.replyTo,
                        messageID: message.properties.messageID ?? "notify-\(UUID().uuidString.lowercased())-\(index)",
                        timestamp: UInt64(Date().timeIntervalSince1970),
                        type: message.properties.type),
                    mandatory: true)
            }
            let outcomes = try await channel.publish(outbound)
            for (message, outcome) in zip(outbound, outcomes) where !outcome.isConfirmed {
                notTaken += 1
                Self.say(
                    "\(message.properties.messageID ?? "") not taken by the broker: \(outcome) (is the worker's topology declared?)"
                )
            }
            Self.say("published \(outbound.count - notTaken) of \(outbound.count) to '\(exchange)'; results:")
            let published = Set(outbound.compactMap(\.properties.messageID))
            try await Self.printResults(from: channel, queue: results, of: published, idle: idle)
        } catch {
            await connection.close()
            Self.say("\(error)")
            throw ExitCode(ExitStatus.of(error).rawValue)
        }
        await connection.close()
        if notTaken > 0 { throw ExitCode(ExitStatus.failure.rawValue) }
    }

    static func say(_ text: String) {
        FileHandle.standardError.write(Data("wallet-notify: \(text)\n".utf8))
    }

    /// A setting of the worker's table, resolved as `wallet-worker` does (flag, variable, `<variable>_FILE`).
    static func value<Value>(_ flag: String?, _ entry: Setting.Typed<Value>) throws -> Value? {
        do {
            return try entry.resolve(flag)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// A setting of this command only, resolved the same way.
    static func text(_ flag: String?, _ flagName: String, _ variable: String) throws -> String? {
        do {
            return try Setting.source(of: flag, flagName, variable)?.text
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// `traceparent` when the line has one, and the card id the ordered mode hashes.
    static func headers(of message: InboundMessage) -> AMQPTable? {
        var headers = AMQPTable()
        if let traceparent = message.properties.traceparent { headers["traceparent"] = .string(traceparent) }
        if let card = message.bodyDigitalCardId { headers[ShardedTopology.cardHeader] = .string(card) }
        return headers.isEmpty ? nil : headers
    }

    static func readMessages(paths: [String]) throws -> [InboundMessage] {
        let sources: [(name: String, data: Data)] = try (paths.isEmpty ? ["-"] : paths).map { path in
            if path == "-" { return ("stdin", FileHandle.standardInput.readDataToEndOfFile()) }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw NotifyError(description: "\(path): no such file")
            }
            guard !isDirectory.boolValue, let data = FileManager.default.contents(atPath: path) else {
                throw NotifyError(description: "\(path): not a readable file")
            }
            return (path, data)
        }
        var messages: [InboundMessage] = []
        for source in sources {
            for (number, line) in source.data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                .enumerated()
            where !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
                do {
                    messages.append(try RouteLines.message(from: Array(line)))
                } catch {
                    throw NotifyError(description: "\(source.name) line \(number + 1): \(error)")
                }
            }
        }
        return messages
    }

    /// Prints the results of the published messages until none has arrived for `idle`.
    static func printResults(from channel: AMQPChannel, queue: String, of published: Set<String>, idle: Duration)
        async throws
    {
        let consumer = try await channel.consume(queue: queue)
        let printer = Task {
            for try await batch in consumer {
                for delivery in batch {
                    // `<inbound message_id>/<n>` (CONTRACT.md §9): print only the results of what we published.
                    let resultID = delivery.properties.messageID ?? ""
                    let inbound = resultID.split(separator: "/").dropLast().joined(separator: "/")
                    if published.contains(inbound) {
                        var writer = JSONWriter()
                        writer.beginObject()
                        writer.key("exchange")
                        writer.string(delivery.exchange)
                        writer.key("routingKey")
                        writer.string(delivery.routingKey)
                        writer.key("messageId")
                        writer.string(resultID)
                        writer.key("body")
                        writer.raw(delivery.body)
                        writer.endObject()
                        FileHandle.standardOutput.write(Data(writer.takeBytes() + [UInt8(ascii: "\n")]))
                    }
                    try await channel.ack(delivery)
                }
                lastArrival.withLock { $0 = .now }
            }
        }
        lastArrival.withLock { $0 = .now }
        while true {
            try await Task.sleep(for: .milliseconds(100))
            if ContinuousClock.now - lastArrival.withLock({ $0 }) > idle { break }
        }
        try await channel.cancel(consumerTag: consumer.tag)
        _ = await printer.result
    }

    struct NotifyError: Error, CustomStringConvertible {
        var description: String
    }
}

/// When the last result arrived: the printer updates it, the idle wait reads it.
private let lastArrival = Mutex(ContinuousClock.now)

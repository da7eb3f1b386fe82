import AMQPTransport
import ArgumentParser
import Foundation
import Logging
import Synchronization
import WalletRouting
import WalletOperatorTools
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
    @Option(help: "Broker URL, amqp:// or amqps:// (env AMQP_URL). Default: amqp://guest:guest@127.0.0.1:5672/%2f")
    var amqpURL: String?
    @Option(help: "The worker's inbound exchange (env WALLET_INBOUND_EXCHANGE). Default: wallet.notifications")
    var inboundExchange: String?
    @Option(help: "Routing key of every message (env WALLET_NOTIFY_ROUTING_KEY). Default: notification")
    var routingKey: String?
    @Option(help: "How long to wait for more results after the last one, e.g. 5s (env WALLET_NOTIFY_WAIT). Default: 5s")
    var wait: String?
    @Option(help: "Card events exchange (env WALLET_EVENTS_EXCHANGE). Default: wallet.events")
    var eventsExchange: String?
    @Option(help: "Transaction records exchange (env WALLET_TRANSACTIONS_EXCHANGE). Default: wallet.transactions")
    var transactionsExchange: String?
    @Option(help: "Replenishment outcomes exchange (env WALLET_REPLENISHMENT_EXCHANGE). Default: wallet.replenishment")
    var replenishmentExchange: String?
    @Option(help: "Triggered actions exchange (env WALLET_ACTIONS_EXCHANGE). Default: wallet.actions")
    var actionsExchange: String?
    @Option(help: "Installation outcomes exchange (env WALLET_INSTALLATIONS_EXCHANGE). Default: wallet.installations")
    var installationsExchange: String?

    func run() async throws {
        let url = try Self.setting(amqpURL, "--amqp-url", "AMQP_URL") ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
        let parsedURL: AMQPURL
        do {
            parsedURL = try AMQPURL(parsing: url)
        } catch {
            throw ValidationError("\(error.message)")
        }
        let exchange = try Self.setting(inboundExchange, "--inbound-exchange", "WALLET_INBOUND_EXCHANGE")
            ?? "wallet.notifications"
        let key = try Self.setting(routingKey, "--routing-key", "WALLET_NOTIFY_ROUTING_KEY") ?? "notification"
        let idle: Duration
        if let text = try Self.setting(wait, "--wait", "WALLET_NOTIFY_WAIT") {
            guard let parsed = DurationText.parse(text) else {
                throw ValidationError("--wait / WALLET_NOTIFY_WAIT \"\(text)\": expected a duration like 5s")
            }
            idle = parsed
        } else {
            idle = .seconds(5)
        }
        let resultExchanges = [
            try Self.setting(eventsExchange, "--events-exchange", "WALLET_EVENTS_EXCHANGE") ?? "wallet.events",
            try Self.setting(transactionsExchange, "--transactions-exchange", "WALLET_TRANSACTIONS_EXCHANGE")
                ?? "wallet.transactions",
            try Self.setting(replenishmentExchange, "--replenishment-exchange", "WALLET_REPLENISHMENT_EXCHANGE")
                ?? "wallet.replenishment",
            try Self.setting(actionsExchange, "--actions-exchange", "WALLET_ACTIONS_EXCHANGE") ?? "wallet.actions",
            try Self.setting(installationsExchange, "--installations-exchange", "WALLET_INSTALLATIONS_EXCHANGE")
                ?? "wallet.installations",
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
                Self.say("\(message.properties.messageID ?? "") not taken by the broker: \(outcome) (is the worker's topology declared?)")
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

    /// The flag, else the variable, else the file `<variable>_FILE` names (without its trailing newline).
    static func setting(_ flag: String?, _ flagName: String, _ variable: String) throws -> String? {
        if let flag { return flag }
        let environment = ProcessInfo.processInfo.environment
        if let value = environment[variable], !value.isEmpty { return value }
        guard let path = environment[variable + "_FILE"], !path.isEmpty else { return nil }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else {
            throw ValidationError("\(variable)_FILE: cannot read \(path) as a text file")
        }
        var value = Substring(text)
        while value.last == "\n" || value.last == "\r" { value = value.dropLast() }
        return String(value)
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

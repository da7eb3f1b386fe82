import AMQPTransport
import Foundation
import Logging
import Synchronization
import WalletRouting
import WalletOperatorTools
import WalletWorker

/// Publishes notifications to the worker's inbound exchange and prints the results the worker sends back.
///
///     wallet-notify examples/*.jsonl
///
/// Each input line is in `wallet-worker route`'s format ({"properties": {...}, "body": {...}}). Every message is
/// published persistent with a `message_id` (the line's, else a generated one). A private queue bound to the five
/// result exchanges receives the results, as a downstream consumer's would; those of the published messages are
/// printed as JSON lines. Messages that publish nothing (ignored ones) print nothing.
/// A message whose body has a `digitalCardId` carries it in the `digitalCardId` header too, as every publisher
/// must for the ordered mode (`--ordered-shards`: the broker hashes that header to pick the card's shard).
/// Environment: AMQP_URL, WALLET_INBOUND_EXCHANGE and the WALLET_*_EXCHANGE names of the worker,
/// WALLET_NOTIFY_WAIT (how long to wait after the last result, default 5s).
@main
struct WalletNotify {
    static func main() async {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "wallet-notify")
        logger.logLevel = .warning
        let environment = ProcessInfo.processInfo.environment
        let url = environment["AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
        let exchange = environment["WALLET_INBOUND_EXCHANGE"] ?? "wallet.notifications"
        let wait = environment["WALLET_NOTIFY_WAIT"].flatMap(DurationText.parse) ?? .seconds(5)
        do {
            let messages = try readMessages(paths: Array(CommandLine.arguments.dropFirst()))
            let connection = try await AMQPConnection.connect(
                configuration: {
                    var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: url))
                    configuration.connectionName = "wallet-notify"
                    return configuration
                }(), logger: logger)
            let channel = try await connection.openChannel()
            let results = try await channel.declareQueue("", durable: false, exclusive: true, autoDelete: true).name
            for variable in ["EVENTS", "TRANSACTIONS", "REPLENISHMENT", "ACTIONS", "INSTALLATIONS"] {
                let name = environment["WALLET_\(variable)_EXCHANGE"] ?? "wallet.\(variable.lowercased())"
                try await channel.bindQueue(results, exchange: name, routingKey: "#")
            }
            try await channel.enableConfirms()
            let outbound = messages.enumerated().map { index, message in
                AMQPOutboundMessage(
                    exchange: exchange,
                    routingKey: "notification",
                    body: message.body,
                    properties: AMQPMessageProperties(
                        contentType: "application/json",
                        headers: headers(of: message),
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
                FileHandle.standardError.write(Data("wallet-notify: \(message.properties.messageID ?? "") not taken by the broker: \(outcome) (is the worker's topology declared?)\n".utf8))
            }
            FileHandle.standardError.write(Data("wallet-notify: published \(outbound.count) to '\(exchange)'; results:\n".utf8))
            let published = Set(outbound.compactMap(\.properties.messageID))
            try await printResults(from: channel, queue: results, of: published, idle: wait)
            await connection.close()
        } catch {
            FileHandle.standardError.write(Data("wallet-notify: \(error)\n".utf8))
            exit(1)
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
        let sources: [(name: String, data: Data)] =
            paths.isEmpty
            ? [("stdin", FileHandle.standardInput.readDataToEndOfFile())]
            : try paths.map { ($0, try Data(contentsOf: URL(fileURLWithPath: $0))) }
        var messages: [InboundMessage] = []
        for source in sources {
            for (number, line) in source.data.split(separator: UInt8(ascii: "\n")).enumerated()
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

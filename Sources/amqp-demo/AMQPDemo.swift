import AMQPTransport
import Logging

// A small end-to-end tour of the transport: declare a queue, publish with confirms, consume, acknowledge.
// Usage: AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f swift run amqp-demo [message count]

@main
struct AMQPDemo {
    static func main() async {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "amqp-demo")
        logger.logLevel = .info
        let count = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 10_000
        let urlText = Environment.value("AMQP_URL") ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
        do {
            var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: urlText))
            configuration.connectionName = "amqp-demo"
            let connection = try await AMQPConnection.connect(configuration: configuration, logger: logger)
            let channel = try await connection.openChannel()
            let queue = try await channel.declareQueue("", durable: false, exclusive: true, autoDelete: true).name
            try await channel.enableConfirms()

            let start = ContinuousClock.now
            let batchSize = 500
            var published = 0
            while published < count {
                let batch = (published..<min(count, published + batchSize)).map { index in
                    AMQPOutboundMessage(
                        exchange: "", routingKey: queue, body: Array("{\"n\":\(index)}".utf8),
                        properties: .init(
                            contentType: "application/json", deliveryMode: .persistent, messageID: "demo-\(index)"),
                        mandatory: true
                    )
                }
                let outcomes = try await channel.publish(batch)
                precondition(outcomes.allSatisfy(\.isConfirmed), "unconfirmed publish: \(outcomes)")
                published += batch.count
            }
            let publishTime = ContinuousClock.now - start
            print(
                "published \(count) persistent messages with confirms in \(publishTime) (\(rate(count, publishTime)) msg/s)"
            )

            try await channel.setPrefetch(count: 200)
            let consumeStart = ContinuousClock.now
            var received = 0
            for try await batch in try await channel.consume(queue: queue) {
                received += batch.count
                try await channel.ack(deliveryTag: batch.last!.deliveryTag, multiple: true)
                if received >= count { break }
            }
            let consumeTime = ContinuousClock.now - consumeStart
            print("consumed and acknowledged \(received) in \(consumeTime) (\(rate(received, consumeTime)) msg/s)")
            await connection.close()
        } catch {
            logger.error("demo failed: \(error)")
            exit(1)
        }
    }

    static func rate(_ count: Int, _ duration: Duration) -> Int {
        Int(Double(count) / duration.secondsValue)
    }
}

#if canImport(Glibc)
    import Glibc
#endif

enum Environment {
    static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

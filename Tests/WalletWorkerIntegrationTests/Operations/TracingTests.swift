import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// OpenTelemetry tracing of a real worker process, exporting to a real OTLP/HTTP receiver in the test.
    @Suite("Tracing", .timeLimit(.minutes(3)))
    struct TracingTests {
        static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        static let inboundSpanID = "00f067aa0ba902b7"
        static let traceparent = "00-\(traceID)-\(inboundSpanID)-01"
        /// Another trace, on a message whose body is not JSON (rejected and dead-lettered).
        static let rejectedTraceID = "0af7651916cd43dd8448eb211c80319c"
        static let rejectedTraceparent = "00-\(rejectedTraceID)-b7ad6b7169203331-01"
        /// Not W3C trace context (upper case): its message starts a trace of its own, and it is still copied as is.
        static let malformedTraceparent = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"

        /// `run` with the test's topology, JSON logs at debug (every processed message is logged).
        static func runArguments(_ topology: ResilienceTopology, database: String) -> [String] {
            [
                "run", "--store", "sqlite:\(database)", "--http-port", "0", "--http-host", "127.0.0.1",
                "--log-format", "json", "--log-level", "debug", "--retry-delay", "200ms", "--shutdown-grace", "25s",
            ]
                + topology.flags
        }

        static func inbound(
            _ id: String, body: String, traceparent: String, to exchange: String
        ) -> AMQPOutboundMessage {
            AMQPOutboundMessage(
                exchange: exchange, routingKey: "wallet.notification", body: Array(body.utf8),
                properties: AMQPMessageProperties(
                    contentType: "application/json", headers: ["traceparent": .string(traceparent)],
                    deliveryMode: .persistent, messageID: id),
                mandatory: true)
        }

        @Test(
            "each message gets a CONSUMER span continuing its traceparent, with store and publish children in the full detail; results keep the inbound traceparent; log lines carry trace_id; spans are flushed on SIGTERM"
        )
        func spansOfAMessage() async throws {
            let receiver = try OTLPReceiver()
            defer { receiver.close() }
            let database = temporarySQLitePath("tracing")
            defer { removeSQLite(database) }
            try await withResilienceTopology("tracing") { topology, connection, channel in
                // A long schedule delay: the spans can only arrive through the flush at graceful shutdown.
                let worker = try WorkerProcess(
                    Self.runArguments(topology, database: database), amqpURL: TestBroker.urlText,
                    label: "tracing-worker",
                    environment: [
                        "OTEL_TRACES_EXPORTER": "otlp",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                        "OTEL_BSP_SCHEDULE_DELAY": "600000",
                        // Every span, so the store and publish spans are exported too (the default is one per message:
                        // ExecutorTracingTests).
                        "WALLET_TRACE_DETAIL": "full",
                    ])
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))

                try await channel.enableConfirms()
                let cps = InboundSpec.cps("trace-1", card: "TRACE-1", code: "CBP.info.tokenProvisioned")
                try await publishConfirmed(
                    [
                        Self.inbound("trace-1", body: cps.text, traceparent: Self.traceparent, to: topology.inbound),
                        Self.inbound(
                            "trace-2", body: "not json", traceparent: Self.rejectedTraceparent, to: topology.inbound),
                        Self.inbound(
                            "trace-3", body: InboundSpec.action("trace-3", action: "tracing.root").text,
                            traceparent: Self.malformedTraceparent, to: topology.inbound),
                    ], on: channel)
                // Two results for the CPS install, one `rejected` result for the body that is not JSON, one action.
                try await waitUntil("readyCount(topology.capture) >= 4\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= 4
                }
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                #expect(results.count == 4)
                let inboundTraceparents = [
                    "trace-1": Self.traceparent, "trace-2": Self.rejectedTraceparent,
                    "trace-3": Self.malformedTraceparent,
                ]
                for result in results {
                    let expected = inboundTraceparents[result.inboundID ?? ""] ?? "?"
                    #expect(
                        result.headers?["traceparent"] == .string(expected),
                        "the result \(result.messageID ?? "?") does not carry the inbound traceparent unchanged")
                }
                #expect(receiver.requests.isEmpty, "spans were exported before the shutdown's flush")

                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(0), "\(worker.logTail())")
                try await waitUntil(
                    "10 spans exported; received: \((try? receiver.spans()) ?? [])\n\(worker.logTail())"
                ) { try receiver.spans().count >= 10 }
                let spans = try receiver.spans()
                #expect(
                    receiver.requests.allSatisfy { $0.path == "/v1/traces" && $0.contentType == "application/json" })

                // The message span: CONSUMER, child of the backend's span, named after the work queue.
                let processSpans = spans.filter { $0.traceID == Self.traceID && $0.name == "process \(topology.work)" }
                let process = try #require(processSpans.first, "no process span in the inbound trace: \(spans)")
                #expect(processSpans.count == 1)
                #expect(process.kind == 5)
                #expect(process.parentSpanID == Self.inboundSpanID)
                #expect(process.serviceName == "wallet-worker")
                #expect(process.statusCode != 2, "\(process)")
                #expect(process.attributes["messaging.system"] == "rabbitmq")
                #expect(process.attributes["messaging.operation.type"] == "process")
                // The RabbitMQ convention (issue 25): the destination is the exchange the message was published to,
                // the queue is the subscription; the broker is the server.
                #expect(process.attributes["messaging.destination.name"] == topology.inbound)
                #expect(process.attributes["messaging.destination.subscription.name"] == topology.work)
                let broker = try AMQPURL(parsing: TestBroker.urlText)
                #expect(process.attributes["server.address"] == broker.host)
                #expect(process.attributes["server.port"] == "\(broker.port)")
                #expect(process.attributes["error.type"] == nil)
                #expect(process.attributes["messaging.message.id"] == "trace-1")
                #expect(process.attributes["messaging.rabbitmq.destination.routing_key"] == "wallet.notification")
                #expect(process.attributes["wallet.outcome"] == "processed")
                #expect(process.attributes["wallet.sender"] == "CPS")
                #expect(process.attributes["wallet.fate"] == "processed")

                // Its children: the store transaction (CLIENT) and one PRODUCER span per result.
                let children = spans.filter { $0.parentSpanID == process.spanID }
                #expect(children.allSatisfy { $0.traceID == Self.traceID })
                let store = children.filter { $0.name == "store transaction" }
                #expect(store.count == 1, "\(children)")
                #expect(store.first?.kind == 3)
                #expect(store.first?.attributes["db.system"] == "sqlite")
                #expect(store.first?.attributes["db.operation.batch.size"].flatMap { Int($0) } ?? 0 >= 1)
                let publishes = children.filter { $0.name == "publish \(topology.events)" }
                #expect(publishes.count == 2, "\(children)")
                #expect(publishes.allSatisfy { $0.kind == 4 && $0.statusCode != 2 })
                #expect(
                    Set(publishes.compactMap { $0.attributes["messaging.message.id"] }) == ["trace-1/0", "trace-1/1"])
                #expect(publishes.allSatisfy { $0.attributes["messaging.destination.name"] == topology.events })
                #expect(publishes.allSatisfy { $0.attributes["server.port"] == "\(broker.port)" })

                // The rejected message: its own trace, an error status, its rejected result and its dead letter.
                let rejected = try #require(
                    spans.first { $0.traceID == Self.rejectedTraceID && $0.kind == 5 }, "\(spans)")
                #expect(rejected.parentSpanID == "b7ad6b7169203331")
                #expect(rejected.statusCode == 2, "\(rejected)")
                #expect(
                    rejected.attributes["wallet.fate"] == "rejected",
                    "the fate's one name, as in wallet_dead_letters_total")
                #expect(rejected.attributes["error.type"] == "rejected", "\(rejected)")
                let rejectedPublishes = spans.filter { $0.parentSpanID == rejected.spanID && $0.kind == 4 }.map(\.name)
                #expect(
                    Set(rejectedPublishes) == ["publish \(topology.events)", "publish \(topology.deadLetterExchange)"])

                // A malformed traceparent: a new root, found by its message id, and no warning per message about it.
                let root = try #require(
                    spans.first { $0.kind == 5 && $0.attributes["messaging.message.id"] == "trace-3" }, "\(spans)")
                #expect(root.parentSpanID == nil && root.traceID != Self.traceID, "\(root)")
                #expect(!worker.log.contains("Failed to extract"), "\(worker.logTail())")

                // The log lines about each message carry its trace.
                let lines = worker.log.split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
                let processed = lines.filter { ($0["message_id"] as? String) == "trace-1" }
                #expect(!processed.isEmpty, "\(worker.logTail())")
                #expect(processed.allSatisfy { $0["trace_id"] as? String == Self.traceID }, "\(processed)")
                #expect(processed.allSatisfy { $0["span_id"] as? String == process.spanID }, "\(processed)")
                let deadLettered = lines.filter { ($0["message_id"] as? String) == "trace-2" }
                #expect(
                    !deadLettered.isEmpty
                        && deadLettered.allSatisfy { $0["trace_id"] as? String == Self.rejectedTraceID },
                    "\(deadLettered)")
            }
        }

        @Test(
            "an exporter this build lacks stops the worker at start, naming the variable",
            arguments: [
                (["OTEL_TRACES_EXPORTER": "zipkin"], "OTEL_TRACES_EXPORTER"),
                (
                    ["OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"],
                    "OTEL_EXPORTER_OTLP_PROTOCOL"
                ),
            ])
        func unsupportedExporterExits(environment: [String: String], variable: String) async throws {
            let topology = ResilienceTopology("tracing-invalid")
            let worker = try WorkerProcess(
                Self.runArguments(topology, database: temporarySQLitePath("tracing-invalid")),
                amqpURL: TestBroker.urlText, label: "tracing-invalid-worker", environment: environment)
            defer {
                worker.kill()
                worker.process.removeLog()
            }
            let ended = await worker.waitForExit(timeout: .seconds(60))
            let (exit, _) = try #require(ended, "still running\n\(worker.logTail())")
            #expect(exit != .exited(0) && exit != .signaled(SIGKILL), "\(exit)\n\(worker.logTail())")
            #expect(worker.log.contains(variable), "\(worker.logTail())")
        }

        @Test("nothing is exported without OTEL_* settings, or with OTEL_SDK_DISABLED=true", arguments: [false, true])
        func offByDefault(sdkDisabled: Bool) async throws {
            let receiver = try OTLPReceiver()
            defer { receiver.close() }
            let database = temporarySQLitePath("tracing-off")
            defer { removeSQLite(database) }
            try await withResilienceTopology("tracing-off") { topology, connection, channel in
                let environment =
                    sdkDisabled
                    ? [
                        "OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BSP_SCHEDULE_DELAY": "50",
                    ] : [:]
                let worker = try WorkerProcess(
                    Self.runArguments(topology, database: database), amqpURL: TestBroker.urlText,
                    label: "tracing-off-worker", environment: environment)
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()
                let action = InboundSpec.action("off-1", action: "tracing.off")
                try await publishConfirmed(
                    [Self.inbound("off-1", body: action.text, traceparent: Self.traceparent, to: topology.inbound)],
                    on: channel)
                try await waitUntil("readyCount(topology.capture) >= 1\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= 1
                }
                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(0), "\(worker.logTail())")
                #expect(receiver.requests.isEmpty)
                #expect(!worker.log.contains("tracing on"), "\(worker.logTail())")
                #expect(worker.log.contains("off-1") && !worker.log.contains("trace_id"), "\(worker.logTail())")
            }
        }
    }
}

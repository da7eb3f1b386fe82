import AMQPTransport
import BrokerTestSupport
import TestSupport
import Testing

/// A connection that breaks under the transport (through `FaultyRelay`): everything waiting on it fails
/// with a retriable error and the events stream says so, instead of hanging.
@Suite("Lost connections", .timeLimit(.minutes(1)))
struct ConnectionLossTests {
    private static func relayToTestBroker() throws -> FaultyRelay {
        let broker = try AMQPURL(parsing: TestBroker.urlText)
        return try FaultyRelay(upstreamHost: broker.host, upstreamPort: broker.port)
    }

    @Test("a severed connection fails its consumer and later calls with .connectionLost and reports .closed(error:)")
    func severedConnectionFailsEverything() async throws {
        let relay = try Self.relayToTestBroker()
        defer { relay.close() }
        try await withBrokerSession(
            "severed",
            configure: {
                $0.url.host = "127.0.0.1"
                $0.url.port = relay.port
            }
        ) { session in
            let events = EventRecorder()
            let watcher = events.watch(session.connection)
            let queue = try await session.declareOwnedQueue("severed")
            let consumer = try await session.channel.consume(queue: queue)

            async let consumerError = expectAMQPError("iterating a consumer while its connection is severed") {
                for try await batch in consumer { Issue.record("unexpected deliveries: \(batch.map(\.text))") }
            }
            relay.sever()
            let error = try await consumerError
            #expect(error.code == .connectionLost, "\(error)")
            #expect(error.isRetriable)

            try await within(.seconds(5), "the events stream to finish after the loss") { await watcher.value }
            #expect(events.recorded.count == 1)
            if case .closed(let closedBy)? = events.recorded.first {
                #expect(closedBy?.code == .connectionLost, "\(String(describing: closedBy))")
            } else {
                Issue.record("expected .closed(error:), got \(events.recorded)")
            }
            let connection = session.connection
            let later = try await expectAMQPError("opening a channel on the lost connection") {
                try await connection.openChannel()
            }
            #expect(later.code == .connectionLost)
        }
    }

    @Test(
        "a broker that goes silent is detected by the heartbeat and fails a pending publish, well before its confirm timeout"
    )
    func silentBrokerIsDetectedByHeartbeat() async throws {
        let relay = try Self.relayToTestBroker()
        defer { relay.close() }
        try await withBrokerSession(
            "silent broker",
            configure: {
                $0.url.host = "127.0.0.1"
                $0.url.port = relay.port
                $0.heartbeat = .seconds(2)
            }
        ) { session in
            let events = EventRecorder()
            let watcher = events.watch(session.connection)
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("silent-broker")
            // librabbitmq's deadline runs from its last socket read, not from the freeze: under load (CI runs
            // these suites in parallel, under TSan too) the test can resume a second or more after that read.
            // So the lower bound is measured from before the last reply, the upper one from the freeze.
            let beforeLastReply = ContinuousClock.now
            try await channel.enableConfirms()  // a reply: the last traffic before the silence

            relay.freeze()
            let frozenAt = ContinuousClock.now
            let error = try await expectAMQPError("a confirmed publish to a silent broker", within: .seconds(15)) {
                try await channel.publish([message(to: queue, "into the void")], confirmTimeout: .seconds(30))
            }
            let sinceLastReply = ContinuousClock.now - beforeLastReply
            let sinceFreeze = ContinuousClock.now - frozenAt
            // librabbitmq gives up after two heartbeat intervals without traffic (4 s after the last read; the
            // transport's own check, at 5 s, is the backstop).
            #expect(error.code == .heartbeatTimeout, "\(error)")
            #expect(error.isRetriable)
            #expect(
                sinceLastReply >= .seconds(3),
                "gave up \(sinceLastReply) after the last reply, before two heartbeat intervals")
            #expect(sinceFreeze < .seconds(8), "took \(sinceFreeze)")

            try await within(.seconds(5), "the events stream to finish after the heartbeat timeout") {
                await watcher.value
            }
            #expect(events.recorded == [.closed(error: error)])
        }
    }
}

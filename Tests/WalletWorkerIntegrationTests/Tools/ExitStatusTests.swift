import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc  // close(2)
#endif

/// Issue 37, item 3: every command's exit status is what its help and the README's table say (0 done, 1 nothing
/// found or refused, 2 could not reach, 64 a setting that does not parse or is out of range, 130 interrupted with a
/// closing line), run as an operator runs each one. Not in the serialized `Resilience` chain: its broker cases use a
/// topology of their own.
@Suite("Exit statuses of every command", .timeLimit(.minutes(5)))
struct ExitStatusTests {
    /// One command and what it must end with.
    struct Case: CustomStringConvertible {
        var arguments: [String]
        var status: Int32
        /// Text its output must hold (the line that says why).
        var says: String
        var input: String?
        var description: String { "wallet-worker \(arguments.joined(separator: " "))" }
    }

    static let unreachable = "amqp://guest:guest@127.0.0.1:1/%2f"

    private func check(_ cases: [Case], environment: [String: String] = ["AMQP_URL": Self.unreachable]) async throws {
        for entry in cases {
            let (exit, output) = try await walletWorkerCommand(
                entry.arguments, environment: environment, input: entry.input)
            #expect(exit == .exited(entry.status), "\(entry): \(exit)\n\(output)")
            #expect(output.contains(entry.says), "\(entry) does not say \"\(entry.says)\":\n\(output)")
        }
    }

    @Test("without a broker: usage is 64 with Error:, a store or broker that cannot be used 2, no is 1, done 0")
    func withoutABroker() async throws {
        let store = temporarySQLitePath("exit-status")
        let missing = temporarySQLitePath("exit-status-missing")
        defer { removeSQLite(store) }
        let route = #"{"properties":{"messageId":"m-1"},"body":{"sender":"CPS","digitalCardId":"DC-1"}}"#
        try await check([
            Case(arguments: ["run", "--prefetch", "0"], status: 64, says: "Error: --prefetch must be at least 1"),
            Case(arguments: ["run", "--amqp-url", "http://x"], status: 64, says: "Error: --amqp-url"),
            Case(arguments: ["declare", "--prefetch", "0"], status: 64, says: "Error: Unknown option"),
            Case(arguments: ["dead-letters", "summary", "--limit", "0"], status: 64, says: "--limit 0"),
            Case(arguments: ["dead-letters", "list", "--older-than", "soon"], status: 64, says: "--older-than"),
            Case(arguments: ["migrate", "--store", "/no/prefix"], status: 64, says: "expected `sqlite:PATH`"),
            Case(arguments: ["no-such-command"], status: 64, says: "Error:"),
            Case(arguments: ["settings", "--json"], status: 0, says: "\"flag\""),
            Case(arguments: ["migrate", "--check", "--store", "sqlite:\(store)"], status: 1, says: "schema none"),
            Case(arguments: ["migrate", "--store", "sqlite:\(store)"], status: 0, says: "v3"),
            Case(arguments: ["migrate", "--check", "--store", "sqlite:\(store)"], status: 0, says: "v3"),
            Case(
                arguments: ["inspect", "message", "absent", "--store", "sqlite:\(store)"], status: 1,
                says: "no processed message absent"),
            Case(
                arguments: ["inspect", "message", "m-1", "--store", "sqlite:\(missing)"], status: 2,
                says: "does not exist"),
            Case(arguments: ["route"], status: 0, says: "\"disposition\"", input: route + "\n"),
            Case(arguments: ["route"], status: 1, says: #"{"line":1,"error":"#, input: "not json\n"),
            Case(arguments: ["declare"], status: 2, says: "connection refused"),
            Case(arguments: ["dead-letters", "list"], status: 2, says: "connection refused"),
            Case(arguments: ["dead-letters", "purge", "--yes"], status: 2, says: "connection refused"),
        ])
    }

    @Test("run with the operations port taken exits 1 before it takes a message, and says no more than why")
    func portTaken() async throws {
        let store = temporarySQLitePath("exit-status-port")
        defer { removeSQLite(store) }
        let (socket, port) = try listenOnLoopback()
        defer { close(socket) }
        let (exit, output) = try await walletWorkerCommand(
            ["run", "--store", "sqlite:\(store)", "--http-host", "127.0.0.1", "--http-port", "\(port)"],
            environment: ["AMQP_URL": Self.unreachable])
        #expect(exit == .exited(1), "\(exit)\n\(output)")
        #expect(output.contains("the operations endpoint cannot listen on 127.0.0.1:\(port)"), "\(output)")
        // Before the port was taken first, the worker drained and claimed "every batch in hand acknowledged".
        #expect(!output.contains("stopped"), "\(output)")
        #expect(!output.contains("connect"), "it went on to the broker: \(output)")
    }

    @Test("dead-letters against the broker: 1 when nothing matched, 0 when something did, 2 for a refused login")
    func deadLettersOnABroker() async throws {
        try await withResilienceTopology("exit-status") { topology, _, channel in
            try await channel.enableConfirms()
            let environment = ["AMQP_URL": TestBroker.urlText]
            try await check(
                [
                    Case(arguments: ["dead-letters", "list"] + topology.flags, status: 1, says: "listed 0 of 0"),
                    Case(
                        arguments: ["dead-letters", "summary"] + topology.flags, status: 1, says: "summarized 0 of 0"),
                ], environment: environment)
            try await publishConfirmed(
                Self.deadLetters(3, topology: topology, reason: "body is not JSON"), on: channel)
            try await check(
                [
                    Case(
                        arguments: ["dead-letters", "summary", "--json"] + topology.flags, status: 0,
                        says: #""count":3"#),
                    Case(
                        arguments: ["dead-letters", "list", "--json", "--limit", "2"] + topology.flags, status: 0,
                        says: "listed 2 of 3"),
                    Case(
                        arguments: ["dead-letters", "show", "--message-id", "absent"] + topology.flags, status: 1,
                        says: "showed 0 of 3"),
                    Case(
                        arguments: ["dead-letters", "replay", "--sender", "cps"] + topology.flags, status: 1,
                        says: "replayed 0 of 3"),
                    Case(
                        arguments: ["dead-letters", "purge", "--yes", "--reason", "absent"] + topology.flags,
                        status: 1, says: "deleted 0 of 3"),
                    Case(
                        arguments: ["dead-letters", "purge", "--yes", "--limit", "1"] + topology.flags, status: 0,
                        says: "deleted 1 of 3"),
                ], environment: environment)
            var refused = try AMQPURL(parsing: TestBroker.urlText)
            refused.password = "not-the-password"
            try await check(
                [
                    Case(arguments: ["dead-letters", "list"] + topology.flags, status: 2, says: "refused"),
                    Case(arguments: ["run"] + topology.flags, status: 2, says: "refused"),
                ], environment: ["AMQP_URL": "\(refused)"])
        }
    }

    @Test("SIGINT stops a replay between two messages: 130 after its closing line, and no dead letter twice")
    func anInterruptedReplay() async throws {
        let count = 10_000
        try await withResilienceTopology("exit-status-sigint") { topology, connection, channel in
            try await channel.enableConfirms()
            try await publishConfirmed(
                Self.deadLetters(count, topology: topology, reason: "store refused"), on: channel)
            let replay = try WorkerProcess(
                ["dead-letters", "replay", "--yes", "--json"] + topology.flags, amqpURL: TestBroker.urlText,
                label: "exit-status-replay")
            defer {
                replay.kill()
                replay.process.removeLog()
            }
            // The event: replays are confirmed and printed, one at a time.
            let started = await replay.process.waitForOutput(timeout: .seconds(60)) { $0.contains(#""messageId""#) }
            #expect(started != nil, "no replay printed\n\(replay.logTail())")
            replay.process.send(SIGINT)
            guard let (exit, _) = await replay.waitForExit(timeout: .seconds(60)) else {
                Issue.record("the replay did not stop\n\(replay.logTail())")
                return
            }
            let output = replay.log
            #expect(exit == .exited(130), "\(exit)\n\(replay.logTail())")
            let closing = output.split(separator: "\n").last { $0.hasPrefix("replayed ") }.map(String.init) ?? ""
            #expect(closing.contains("stopped early: interrupted"), "\(replay.logTail())")
            let replayed = Int(closing.split(separator: " ").dropFirst().first ?? "") ?? -1
            #expect(replayed > 0 && replayed < count, "the walk ended before the signal: \(closing)")
            #expect(jsonObjects(output).count == replayed, "every replay printed once")
            // Each replayed message is in the work queue once and no longer a dead letter; the rest, and the run's
            // marker (the next run removes it), are still dead letters.
            #expect(try await readyCount(topology.work, on: connection) == replayed)
            #expect(try await readyCount(topology.deadLetterQueue, on: connection) == count - replayed + 1)
        }
    }

    /// Dead letters as the worker publishes them: to the dead-letter exchange, with the reason and a timestamp.
    static func deadLetters(_ count: Int, topology: ResilienceTopology, reason: String) -> [AMQPOutboundMessage] {
        (0..<count).map { index in
            AMQPOutboundMessage(
                exchange: topology.deadLetterExchange, routingKey: "notification",
                body: Array(#"{"sender":"TNS","digitalCardId":"DC-\#(index)"}"#.utf8),
                properties: AMQPMessageProperties(
                    headers: ["x-worker-error": .string(reason)], deliveryMode: .persistent,
                    messageID: "exit-status-\(index)", timestamp: UInt64(Date().timeIntervalSince1970)),
                mandatory: true)
        }
    }
}

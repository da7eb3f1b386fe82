// Every case of the golden corpus end to end through RabbitMQ: the broker path must equal `wallet-worker route`.
import AMQPTransport
import BrokerTestSupport
import Foundation
import Testing
import WalletOperatorTools
import WalletRouting
import WalletWorker

/// One line of a `Tests/WalletRoutingTests/Golden/*.jsonl` file.
struct GoldenBrokerCase: Sendable, CustomTestStringConvertible {
    var file: String
    var name: String
    var contract: String
    var steps: [JSONObject]

    var testDescription: String { name }
}

enum GoldenBrokerCorpus {
    /// `Tests/WalletRoutingTests/Golden`, from the repository's root.
    static let directory = TestBroker.repositoryRoot.appendingPathComponent("Tests/WalletRoutingTests/Golden")

    /// Every case of every file, and what could not be read (checked by `corpusIsComplete`).
    static let loaded: (cases: [GoldenBrokerCase], files: [String], problems: [String]) = {
        var cases: [GoldenBrokerCase] = []
        var problems: [String] = []
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".jsonl") }.sorted()
        for file in files {
            guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(file).path) else {
                problems.append("\(file): unreadable")
                continue
            }
            for (number, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
                if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { continue }
                guard let object = (try? JSONParser.parse(Array(line)))?.objectValue,
                    let name = object["name"]?.stringValue,
                    let steps = object["steps"]?.arrayValue?.compactMap(\.objectValue), !steps.isEmpty
                else {
                    problems.append("\(file) line \(number + 1): not a case with a name and steps")
                    continue
                }
                cases.append(
                    GoldenBrokerCase(
                        file: file, name: name, contract: object["contract"]?.stringValue ?? "", steps: steps))
            }
        }
        return (cases, files, problems)
    }()

    static var cases: [GoldenBrokerCase] { loaded.cases }
}

/// A step rewritten for the broker: its `reply_to` replaced by a queue of the test (so `amq.rabbitmq.reply-to`
/// and fixed names like `r` cannot collide between cases), as a `route` input line and as the inbound message.
/// A real direct reply-to requester is in `DirectReplyToTests`.
private struct PreparedStep {
    var line: [UInt8]
    var message: InboundMessage
    var note: String?
}

@Suite("Golden corpus through the broker", .timeLimit(.minutes(5)))
struct GoldenBrokerTests {
    /// Cases run a few at a time: each starts a worker with two connections (2 CPU cores shared).
    static let limiter = ConcurrencyLimiter(limit: 6)

    @Test("the corpus is found and every line is a case")
    func corpusIsComplete() {
        let loaded = GoldenBrokerCorpus.loaded
        #expect(
            Set(loaded.files).isSuperset(of: [
                "actions.jsonl", "cps.jsonl", "envelope.jsonl", "installations.jsonl", "mg.jsonl", "rejected.jsonl",
                "tns.jsonl",
            ]), "golden files under \(GoldenBrokerCorpus.directory.path): \(loaded.files)")
        #expect(loaded.problems.isEmpty, "\(loaded.problems)")
        #expect(loaded.cases.count >= 200, "only \(loaded.cases.count) golden cases loaded")
        let names = loaded.cases.map(\.name)
        #expect(Set(names).count == names.count, "duplicate case names")
    }

    @Test("broker path equals `wallet-worker route`", arguments: GoldenBrokerCorpus.cases)
    func brokerPathEqualsRoutePath(_ golden: GoldenBrokerCase) async throws {
        try await Self.limiter.run {
            try await Self.run(golden)
        }
    }

    private static func prepare(_ golden: GoldenBrokerCase, prefix: String) throws -> (
        steps: [PreparedStep], replyQueues: [String: String]
    ) {
        var replyQueues: [String: String] = [:]
        var steps: [PreparedStep] = []
        for (index, step) in golden.steps.enumerated() {
            var members: [JSONObject.Member] = []
            if var properties = step["properties"]?.objectValue {
                for (position, member) in properties.members.enumerated() where member.key == "replyTo" {
                    guard let original = member.value.stringValue else { continue }
                    let queue = replyQueues[original] ?? "\(prefix).reply.\(replyQueues.count)"
                    replyQueues[original] = queue
                    properties.members[position].value = .string(queue)
                }
                members.append(.init(key: "properties", value: .object(properties)))
            }
            for key in ["body", "bodyText", "bodyBase64", "padWithSpacesTo"] {
                if let value = step[key] { members.append(.init(key: key, value: value)) }
            }
            var writer = JSONWriter()
            writer.value(.object(JSONObject(members: members)))
            let line = writer.takeBytes()
            let message: InboundMessage
            do {
                message = try RouteLines.message(from: line)
            } catch {
                throw BrokerTestError("step \(index) of \(golden.name) is not a route input line: \(error)")
            }
            steps.append(PreparedStep(line: line, message: message, note: step["note"]?.stringValue))
        }
        return (steps, replyQueues)
    }

    private static func run(_ golden: GoldenBrokerCase) async throws {
        try await withWorkerEnvironment("golden") { environment in
            let topology = environment.topology
            let (steps, replyNames) = try prepare(golden, prefix: environment.prefix)
            // The route path: one subprocess per case, so the case's steps share one fresh store.
            let routed = try await RouteCommand.route(lines: steps.map(\.line)).map(RoutedLine.init(parsing:))
            try #require(routed.count == steps.count, "route printed \(routed.count) lines for \(steps.count) steps")

            // The broker path: a fresh worker, captures bound before anything is published.
            let worker = try await environment.startWorker()
            let capture = try await environment.resultCapture(replyQueues: Array(replyNames.values))
            let deadLetters = try await environment.deadLetterReader()

            var differences: [String] = []
            var primaryEnd = 0
            var replyEnds: [String: Int] = [:]
            var deadEnd = 0
            var stepPrimaries: [[CapturedMessage]] = []
            for (index, step) in steps.enumerated() {
                let route = routed[index]
                let primaries = route.results.filter { !$0.exchange.isEmpty }
                primaryEnd += primaries.count
                for copy in route.results where copy.exchange.isEmpty {
                    replyEnds[copy.routingKey, default: 0] += 1
                }
                if route.disposition == "deadLetter" { deadEnd += 1 }
                let headers: [(String, AMQPFieldValue)] = [("x-golden-step", .string("\(golden.name)#\(index)"))]
                try await environment.publish(InboundSpec(step.message, headers: headers))
                let what = "step \(index) of \(golden.name)\(step.note.map { " (\($0))" } ?? "")"
                let received = try await capture.results.waitFor(primaryEnd, what)
                stepPrimaries.append(Array(received[(primaryEnd - primaries.count)..<primaryEnd]))
                for (name, end) in replyEnds { try await capture.replyQueue(name).waitFor(end, what) }
                try await deadLetters.waitFor(deadEnd, what)
            }

            // A sentinel processed after every step: once its result is in, nothing more can come for the steps.
            let sentinel = InboundSpec(
                json: #"{"action":"golden.sentinel"}"#, messageID: "\(environment.prefix).sentinel")
            try await environment.publish(sentinel)
            let all = try await capture.results.waitFor(primaryEnd + 1, "the sentinel after \(golden.name)")
            // What each queue holds now, up to a marker published behind it: anything the steps still caused would
            // be there (the worker published it, confirmed, before the sentinel's result).
            let finalPrimaries = try await capture.results.messagesBeforeAMarker()
            var finalReplies: [String: [CapturedMessage]] = [:]
            for (name, queue) in capture.replies { finalReplies[name] = try await queue.messagesBeforeAMarker() }
            let deadMessages = try await deadLetters.messagesBeforeAMarker()
            if finalPrimaries.count != primaryEnd + 1
                || all[primaryEnd].properties.messageID != "\(environment.prefix).sentinel/0"
            {
                differences.append(
                    "results: expected \(primaryEnd) then the sentinel's, got \(finalPrimaries.count): "
                        + finalPrimaries.map(\.summary).joined(separator: "\n  "))
            }
            for (name, end) in replyEnds where finalReplies[name]?.count != end {
                differences.append(
                    "reply queue for \(name): expected \(end) copies, got \(finalReplies[name]?.count ?? -1)")
            }
            // Copies of results of steps that route said published none to this queue.
            for (_, queue) in replyNames where replyEnds[queue] == nil {
                if let count = finalReplies[queue]?.count, count > 0 {
                    differences.append("reply queue \(queue): \(count) unexpected copies")
                }
            }
            if deadMessages.count != deadEnd {
                differences.append(
                    "dead-letter queue: expected \(deadEnd), got \(deadMessages.count): "
                        + deadMessages.map(\.summary).joined(separator: "\n  "))
            }

            // Compare step by step.
            var replyCursor: [String: Int] = [:]
            var deadCursor = 0
            for (index, step) in steps.enumerated() {
                let route = routed[index]
                let tag = "step \(index)\(step.note.map { " (\($0))" } ?? "")"
                let brokerPrimaries = stepPrimaries[index]
                let routePrimaries = route.results.filter { !$0.exchange.isEmpty }
                for (position, (expected, actual)) in zip(routePrimaries, brokerPrimaries).enumerated() {
                    differences += compare(route: expected, broker: actual, topology: topology)
                        .map { "\(tag) result \(position): \($0)" }
                }
                // reply_to copies: each identical to the primary it follows in route's order.
                var lastPrimary: CapturedMessage?
                var primaryIndex = 0
                for result in route.results {
                    if !result.exchange.isEmpty {
                        lastPrimary = primaryIndex < brokerPrimaries.count ? brokerPrimaries[primaryIndex] : nil
                        primaryIndex += 1
                        continue
                    }
                    let queue = result.routingKey
                    let cursor = replyCursor[queue, default: 0]
                    replyCursor[queue] = cursor + 1
                    guard let copies = finalReplies[queue], cursor < copies.count,
                        let primary = lastPrimary
                    else {
                        differences.append(
                            "\(tag): reply_to copy \(cursor) on \(queue) missing (or no primary before it)")
                        continue
                    }
                    let copy = copies[cursor]
                    if copy.exchange != "" || copy.routingKey != queue {
                        differences.append(
                            "\(tag): copy published to '\(copy.exchange)' '\(copy.routingKey)', expected the default exchange, key \(queue)"
                        )
                    }
                    if copy.body != primary.body {
                        differences.append(
                            "\(tag): reply_to copy body differs from its primary:\n    copy:    \(copy.text)\n    primary: \(primary.text)"
                        )
                    }
                    if copy.properties != primary.properties {
                        differences.append(
                            "\(tag): reply_to copy properties \(copy.properties) differ from the primary's \(primary.properties)"
                        )
                    }
                }
                if route.disposition == "deadLetter" {
                    defer { deadCursor += 1 }
                    guard deadCursor < deadMessages.count else { continue }
                    differences += checkDeadLetter(
                        deadMessages[deadCursor], step: step, reason: route.reason,
                        stepTag: "\(golden.name)#\(index)", topology: topology
                    ).map { "\(tag) dead letter: \($0)" }
                    if !brokerPrimaries.contains(where: {
                        $0.properties.type == "rejected" && $0.exchange == topology.resultExchanges.events
                    }) {
                        differences.append(
                            "\(tag): dead-lettered but no `rejected` result on \(topology.resultExchanges.events)")
                    }
                } else if route.disposition != "acknowledge" {
                    differences.append("\(tag): route disposition \(route.disposition)")
                }
            }

            // Every inbound message left the work queue (acknowledged or dead-lettered) and none went to retry.
            try await worker.stop()  // graceful: what it held is acknowledged; nothing unacknowledged is left
            let work = try await environment.messageCount(topology.workQueue)
            let retry = try await environment.messageCount(topology.retryQueue)
            if work != 0 || retry != 0 {
                differences.append(
                    "after the case: \(work) messages left in the work queue, \(retry) in the retry queue")
            }

            if !differences.isEmpty {
                Issue.record(
                    Comment(
                        rawValue:
                            "golden case \(golden.name) (\(golden.file)): \(golden.contract)\n"
                            + differences.map { "- " + $0 }.joined(separator: "\n")))
            }
        }
    }

    /// A broker result against route's: same place, properties, and body bytes up to the timestamps.
    private static func compare(route: RoutedLine.Result, broker: CapturedMessage, topology: Topology) -> [String] {
        var differences: [String] = []
        let exchange = topology.mapDefaultExchange(route.exchange)
        func check<T: Equatable>(_ what: String, _ expected: T, _ actual: T) {
            if expected != actual { differences.append("\(what): route \(expected), broker \(actual)") }
        }
        check("exchange", exchange, broker.exchange)
        check("routing key", route.routingKey, broker.routingKey)
        check("message_id", route.messageID, broker.properties.messageID)
        check("correlation_id", route.correlationID, broker.properties.correlationID)
        check("type", route.type, broker.properties.type)
        check("traceparent header", route.traceparent, broker.stringHeader("traceparent"))
        check("content_type", "application/json", broker.properties.contentType)
        check("delivery_mode", AMQPMessageProperties.DeliveryMode.persistent, broker.properties.deliveryMode)
        var problems: [String] = []
        let expectedBody = ResultChecks.normalisedBody(route.body, problems: &problems)
        let actualBody = ResultChecks.normalisedBody(broker.body, problems: &problems)
        differences += problems
        if expectedBody != actualBody {
            differences.append("body (timestamps normalised):\n    route:  \(expectedBody)\n    broker: \(actualBody)")
        }
        return differences
    }

    /// The original message in the dead-letter queue: body and properties untouched, headers kept, plus
    /// `x-worker-error` equal to route's reason.
    private static func checkDeadLetter(
        _ dead: CapturedMessage, step: PreparedStep, reason: String?, stepTag: String, topology: Topology
    ) -> [String] {
        var differences: [String] = []
        let original = InboundSpec(step.message, headers: [("x-golden-step", .string(stepTag))]).amqpProperties
        if dead.body != step.message.body {
            differences.append(
                "body differs from the original (\(dead.body.count) vs \(step.message.body.count) bytes)")
        }
        var withoutHeaders = dead.properties
        withoutHeaders.headers = nil
        var originalWithoutHeaders = original
        originalWithoutHeaders.headers = nil
        if withoutHeaders != originalWithoutHeaders {
            differences.append("properties \(withoutHeaders) differ from the original's \(originalWithoutHeaders)")
        }
        for (key, value) in original.headers?.entries ?? [] where dead.properties.headers?[key] != value {
            differences.append(
                "original header \(key) = \(value) not kept (got \(String(describing: dead.properties.headers?[key])))")
        }
        if dead.stringHeader("x-worker-error") != reason {
            differences.append(
                "x-worker-error \(dead.stringHeader("x-worker-error") ?? "missing"), route's reason \(reason ?? "nil")")
        }
        if dead.exchange != topology.deadLetterExchange {
            differences.append("arrived through '\(dead.exchange)', expected \(topology.deadLetterExchange)")
        }
        return differences
    }
}

extension Topology {
    /// The test's name for a result exchange the routing core names by its default (`wallet.events`, ...),
    /// as `wallet-worker route` prints it. The default exchange `""` stays itself.
    func mapDefaultExchange(_ name: String) -> String {
        let defaults = RoutingSettings.ResultExchanges()
        switch name {
        case defaults.events: return resultExchanges.events
        case defaults.transactions: return resultExchanges.transactions
        case defaults.replenishment: return resultExchanges.replenishment
        case defaults.actions: return resultExchanges.actions
        case defaults.installations: return resultExchanges.installations
        default: return name
        }
    }
}

// MARK: - Checks of this suite

enum ResultChecks {
    /// The body with the values of `processedAt` and `expiryDate` replaced by `<time>`; a value that is not
    /// ISO 8601 UTC ending in `Z` (`2026-11-21T08:00:00Z`, optionally with a fraction) is reported in `problems`.
    static func normalisedBody(_ body: [UInt8], problems: inout [String]) -> String {
        guard let text = String(validating: body, as: UTF8.self) else {
            return "<not UTF-8: \(body.count) bytes \(body.prefix(40).map { String($0, radix: 16) }.joined())>"
        }
        var output = ""
        var rest = Substring(text)
        let pattern = /"(processedAt|expiryDate)":"([^"\\]*)"/
        while let match = rest.firstMatch(of: pattern) {
            output += rest[..<match.range.lowerBound]
            let value = String(match.output.2)
            if value.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/) == nil {
                problems.append("\(match.output.1) \"\(value)\" is not ISO 8601 UTC ending in Z")
            }
            output += "\"\(match.output.1)\":\"<time>\""
            rest = rest[match.range.upperBound...]
        }
        output += rest
        return output
    }
}

/// Runs at most `limit` bodies at once (parameterised cases each start a worker with two connections).
actor ConcurrencyLimiter {
    private let limit: Int
    private var running = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        if running < limit {
            running += 1
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func release() {
        if waiters.isEmpty {
            running -= 1
        } else {
            waiters.removeFirst().resume()
        }
    }
}

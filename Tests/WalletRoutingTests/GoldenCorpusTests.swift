import Foundation
import Testing
import WalletRouting

/// The golden corpus: CONTRACT.md §2-§9 by example, one JSON object per line in `Golden/*.jsonl`.
/// `Golden/README.md` describes the format; every case runs from a fresh `InMemoryWalletState` at a fixed `now`.
@Suite("Golden corpus")
struct GoldenCorpusTests {
    @Test("every corpus file loads and holds cases")
    func corpusLoads() throws {
        let files = try GoldenCorpus.files()
        #expect(!files.isEmpty, "no .jsonl file under Golden/")
        for file in files {
            #expect(
                GoldenCorpus.cases.contains { $0.file == file.lastPathComponent },
                "\(file.lastPathComponent) holds no case")
        }
        let names = GoldenCorpus.cases.map(\.name)
        #expect(Set(names).count == names.count, "case names must be unique")
    }

    @Test("golden case", arguments: GoldenCorpus.cases)
    func golden(_ golden: GoldenCase) throws {
        if let loadError = golden.loadError {
            Issue.record("\(golden.file):\(golden.line): \(loadError)")
            return
        }
        let router = NotificationRouter()
        var state = InMemoryWalletState()
        for (index, step) in golden.steps.enumerated() {
            let message = try step.message()
            let decision = try router.route(message, state: state, now: GoldenCorpus.now)
            state.apply(decision.effects)
            guard let expected = step.expect else { continue }
            var diff = GoldenDiff()
            diff.compare(expected, decision: decision, message: message, state: state)
            if !diff.lines.isEmpty {
                Issue.record(
                    Comment(rawValue: golden.report(step: index, message: message, decision: decision, diff: diff)))
            }
        }
    }
}

/// CONTRACT.md §8's last row, which a corpus over an in-memory state cannot show: a transient failure (the store
/// is unavailable) produces no result yet; the router rethrows it so the worker can retry the message.
@Suite("Golden corpus: transient failures (§8)")
struct TransientFailureTests {
    struct StoreUnavailable: Error {}

    /// A store that fails every read.
    struct UnavailableState: WalletStateReading {
        func card(_ digitalCardId: String) throws -> CardRecord? { throw StoreUnavailable() }
        func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool { throw StoreUnavailable() }
        func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
            throw StoreUnavailable()
        }
    }

    @Test(
        "a store failure is rethrown, not answered",
        arguments: [
            #"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"CBP.info.tokenSuspended"}}"#,
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1"}"#,
            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#,
        ])
    func storeFailureIsRethrown(_ body: String) {
        #expect(throws: StoreUnavailable.self) {
            try NotificationRouter().route(
                InboundMessage(body: Array(body.utf8)), state: UnavailableState(),
                now: GoldenCorpus.now)
        }
    }

    @Test(
        "messages that read no state are answered even when the store is down",
        arguments: [
            #"{"action":"ping"}"#, #"{"sender":"TNS","action":"wrong","digitalCardId":"DC-1"}"#, "not json",
        ])
    func statelessMessagesAreAnswered(_ body: String) throws {
        let decision = try NotificationRouter().route(
            InboundMessage(body: Array(body.utf8)), state: UnavailableState(),
            now: GoldenCorpus.now)
        #expect(decision.results.count == 1)
    }
}

// MARK: - The corpus

struct GoldenCase: Sendable, CustomTestStringConvertible {
    var file: String
    var line: Int
    var name: String
    var contract: String
    var steps: [GoldenStep]
    var loadError: String?

    var testDescription: String { "\(name) [\(file):\(line)]" }

    func report(step index: Int, message: InboundMessage, decision: Decision, diff: GoldenDiff) -> String {
        var text = "golden case \(name) (\(file):\(line))\n  \(contract)\n"
        text += "  step \(index + 1) of \(steps.count)"
        if let note = steps[index].note { text += " (\(note))" }
        text += "\n  inbound: \(describe(message.properties)) body \(preview(message.body, limit: 400))\n"
        text += "  differences (expected vs actual):\n"
        for line in diff.lines { text += "    - \(line)\n" }
        text +=
            "  actual: disposition \(decision.disposition), outcome \(decision.outcome.rawValue), \(decision.results.count) result(s)\n"
        for (position, result) in decision.results.enumerated() {
            text +=
                "    [\(position)] exchange \"\(result.exchange)\" key \"\(result.routingKey)\" \(describe(result.properties))\n"
            text += "        \(preview(result.body, limit: 2_000))\n"
        }
        return text
    }

    private func describe(_ properties: InboundProperties) -> String {
        "{messageId: \(properties.messageID ?? "nil"), correlationId: \(properties.correlationID ?? "nil"), "
            + "replyTo: \(properties.replyTo ?? "nil"), type: \(properties.type ?? "nil")}"
    }

    private func describe(_ properties: OutboundProperties) -> String {
        "{messageId: \(properties.messageID ?? "nil"), correlationId: \(properties.correlationID ?? "nil"), "
            + "type: \(properties.type), traceparent: \(properties.traceparent ?? "nil")}"
    }

    private func preview(_ bytes: [UInt8], limit: Int) -> String {
        let text = String(decoding: bytes.prefix(limit), as: UTF8.self)
        return bytes.count > limit ? "\(text)… (\(bytes.count) bytes)" : text
    }
}

struct GoldenStep: Sendable {
    var note: String?
    var properties: JSONObject
    var body: Body
    var padTo: Int?
    var expect: JSONObject?

    enum Body: Sendable {
        case json(JSONValue)
        case text(String)
        case base64(String)
    }

    func message() throws -> InboundMessage {
        var bytes: [UInt8]
        switch body {
        case .json(let value): bytes = value.encoded()
        case .text(let text): bytes = Array(text.utf8)
        case .base64(let encoded):
            guard let data = Data(base64Encoded: encoded) else { throw GoldenFormatError("bodyBase64 is not base64") }
            bytes = Array(data)
        }
        if let padTo {
            guard padTo >= bytes.count else { throw GoldenFormatError("body is longer than padWithSpacesTo") }
            bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: padTo - bytes.count))
        }
        return InboundMessage(
            body: bytes,
            properties: InboundProperties(
                messageID: properties["messageId"]?.stringValue,
                correlationID: properties["correlationId"]?.stringValue,
                replyTo: properties["replyTo"]?.stringValue,
                type: properties["type"]?.stringValue,
                traceparent: properties["traceparent"]?.stringValue))
    }
}

struct GoldenFormatError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum GoldenCorpus {
    /// 2026-11-21T08:00:00Z, the `now` of every case.
    static let now = Date(timeIntervalSince1970: 1_795_248_000)

    static let cases: [GoldenCase] = {
        do {
            return try files().flatMap { try load($0) }
        } catch {
            return [GoldenCase(file: "Golden", line: 0, name: "corpus", contract: "", steps: [], loadError: "\(error)")]
        }
    }()

    static func files() throws -> [URL] {
        guard let directory = Bundle.module.url(forResource: "Golden", withExtension: nil) else {
            throw GoldenFormatError("Golden/ is not in the test bundle")
        }
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "jsonl" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    static func load(_ url: URL) throws -> [GoldenCase] {
        let file = url.lastPathComponent
        let data = try Data(contentsOf: url)
        var cases: [GoldenCase] = []
        for (offset, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            guard line.contains(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\r") }) else { continue }
            do {
                cases.append(try parseCase(Array(line), file: file, line: offset + 1))
            } catch {
                cases.append(
                    GoldenCase(
                        file: file, line: offset + 1, name: "\(file):\(offset + 1)", contract: "",
                        steps: [], loadError: "unreadable case: \(error)"))
            }
        }
        return cases
    }

    static func parseCase(_ line: [UInt8], file: String, line number: Int) throws -> GoldenCase {
        guard let object = try JSONParser.parse(line).objectValue else {
            throw GoldenFormatError("a case is an object")
        }
        guard let name = object["name"]?.stringValue else { throw GoldenFormatError("name is required") }
        guard let steps = object["steps"]?.arrayValue, !steps.isEmpty else {
            throw GoldenFormatError("steps is required")
        }
        let parsed = try steps.map { value -> GoldenStep in
            guard let step = value.objectValue else { throw GoldenFormatError("a step is an object") }
            let body: GoldenStep.Body
            if let text = step["bodyText"]?.stringValue {
                body = .text(text)
            } else if let encoded = step["bodyBase64"]?.stringValue {
                body = .base64(encoded)
            } else if let value = step["body"] {
                body = .json(value)
            } else {
                throw GoldenFormatError("a step needs body, bodyText or bodyBase64")
            }
            return GoldenStep(
                note: step["note"]?.stringValue,
                properties: step["properties"]?.objectValue ?? JSONObject(),
                body: body,
                padTo: step["padWithSpacesTo"]?.numberValue?.intValue,
                expect: step["expect"]?.objectValue)
        }
        guard parsed.last?.expect != nil else { throw GoldenFormatError("the last step needs expect") }
        return GoldenCase(
            file: file, line: number, name: name, contract: object["contract"]?.stringValue ?? "",
            steps: parsed)
    }
}

// MARK: - Comparison

/// Collects every difference between a step's `expect` and the router's decision, as readable lines.
struct GoldenDiff {
    var lines: [String] = []

    mutating func compare(_ expect: JSONObject, decision: Decision, message: InboundMessage, state: InMemoryWalletState)
    {
        compareDisposition(expect, decision.disposition)
        if let outcome = expect["outcome"]?.stringValue, outcome != decision.outcome.rawValue {
            lines.append("outcome: expected \(outcome), got \(decision.outcome.rawValue)")
        }
        if let results = expect["results"]?.arrayValue {
            compareResults(results, decision.results)
        }
        if let cards = expect["cards"]?.objectValue {
            for member in cards.members { compareCard(member.key, member.value, state) }
        }
        if let installation = expect["installationEffect"] {
            compareInstallationEffect(installation, decision.effects)
        }
    }

    private mutating func compareDisposition(_ expect: JSONObject, _ actual: Disposition) {
        let expected = expect["disposition"]?.stringValue ?? "acknowledge"
        switch (expected, actual) {
        case ("acknowledge", .acknowledge): break
        case ("deadLetter", .deadLetter(let reason)):
            if let needle = expect["reasonContains"]?.stringValue, !reason.contains(needle) {
                lines.append("disposition: dead-letter reason \"\(reason)\" does not contain \"\(needle)\"")
            }
        default:
            lines.append("disposition: expected \(expected), got \(actual)")
        }
    }

    private mutating func compareResults(_ expected: [JSONValue], _ actual: [OutboundResult]) {
        if expected.count != actual.count {
            lines.append("results: expected \(expected.count), got \(actual.count)")
        }
        for index in 0..<min(expected.count, actual.count) {
            guard let want = expected[index].objectValue else { continue }
            let got = actual[index]
            let path = "results[\(index)]"
            if let exchange = want["exchange"]?.stringValue, exchange != got.exchange {
                lines.append("\(path).exchange: expected \"\(exchange)\", got \"\(got.exchange)\"")
            }
            if let key = want["routingKey"]?.stringValue, key != got.routingKey {
                lines.append("\(path).routingKey: expected \"\(key)\", got \"\(got.routingKey)\"")
            }
            if let source = want["copyOf"]?.numberValue?.intValue {
                // A reply_to copy: the same bytes and properties as its primary.
                guard source < actual.count else {
                    lines.append("\(path): copy of results[\(source)], which is missing")
                    continue
                }
                if got.body != actual[source].body { lines.append("\(path).body: not identical to results[\(source)]") }
                if got.properties != actual[source].properties {
                    lines.append("\(path).properties: not identical to results[\(source)]")
                }
                continue
            }
            if let properties = want["properties"]?.objectValue {
                compareProperty(path, "messageId", properties, got.properties.messageID)
                compareProperty(path, "correlationId", properties, got.properties.correlationID)
                compareProperty(path, "type", properties, got.properties.type)
                compareProperty(path, "traceparent", properties, got.properties.traceparent)
            }
            if let body = want["body"] {
                compareBody(path, body, got.body)
            }
        }
    }

    private mutating func compareProperty(_ path: String, _ name: String, _ expected: JSONObject, _ actual: String?) {
        let want = expected[name]?.stringValue
        if want != actual {
            lines.append("\(path).properties.\(name): expected \(quoted(want)), got \(quoted(actual))")
        }
    }

    private mutating func compareBody(_ path: String, _ expected: JSONValue, _ bytes: [UInt8]) {
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(bytes)
        } catch {
            lines.append("\(path).body: not JSON (\(error))")
            return
        }
        guard let object = parsed.objectValue else {
            lines.append("\(path).body: not a JSON object")
            return
        }
        // §9: kind, messageId, correlationId, sender, processedAt, then the result's own fields.
        let header = ["kind", "messageId", "correlationId", "sender", "processedAt"]
        let leading = object.members.prefix(header.count).map(\.key)
        if leading != header {
            lines.append("\(path).body: §9 header keys should come first in order \(header), got \(leading)")
        }
        match(expected, parsed, path: "\(path).body")
    }

    /// Structural JSON comparison. Objects compare as key sets (no key may be missing or extra), numbers by their
    /// literal, and two matchers stand for values the contract leaves open: `{"$type":"string"}` and
    /// `{"$contains":"…"}`. `processedAt` and `expiryDate` compare as instants and must be UTC (`Z`).
    private mutating func match(_ expected: JSONValue, _ actual: JSONValue, path: String) {
        if case .object(let want) = expected, want.members.count == 1, let matcher = want.members.first,
            matcher.key.hasPrefix("$")
        {
            switch matcher.key {
            case "$type":
                let kind = matcher.value.stringValue ?? "?"
                if typeName(actual) != kind { lines.append("\(path): expected any \(kind), got \(render(actual))") }
            case "$contains":
                let needle = matcher.value.stringValue ?? ""
                if !(actual.stringValue?.contains(needle) ?? false) {
                    lines.append("\(path): expected a string containing \"\(needle)\", got \(render(actual))")
                }
            default:
                lines.append("\(path): unknown matcher \(matcher.key) in the corpus")
            }
            return
        }
        switch (expected, actual) {
        case (.object(let want), .object(let got)):
            var seen = Set<String>()
            for member in got.members where !seen.insert(member.key).inserted {
                lines.append("\(path).\(member.key): duplicate key")
            }
            for member in want.members {
                let childPath = "\(path).\(member.key)"
                guard let value = got[member.key] else {
                    lines.append("\(childPath): missing (expected \(render(member.value)))")
                    continue
                }
                if member.key == "processedAt" || member.key == "expiryDate" {
                    compareInstant(member.value, value, path: childPath)
                } else {
                    match(member.value, value, path: childPath)
                }
            }
            for member in got.members where want[member.key] == nil {
                lines.append("\(path).\(member.key): unexpected key (got \(render(member.value)))")
            }
        case (.array(let want), .array(let got)):
            if want.count != got.count {
                lines.append("\(path): expected \(want.count) element(s), got \(got.count): \(render(actual))")
            }
            for index in 0..<min(want.count, got.count) {
                match(want[index], got[index], path: "\(path)[\(index)]")
            }
        case (.number(let want), .number(let got)):
            if want.literal != got.literal {
                lines.append("\(path): expected \(want.literal), got \(got.literal)")
            }
        default:
            if expected != actual {
                lines.append("\(path): expected \(render(expected)), got \(render(actual))")
            }
        }
    }

    private mutating func compareInstant(_ expected: JSONValue, _ actual: JSONValue, path: String) {
        guard let text = actual.stringValue, text.hasSuffix("Z"), let got = GoldenTime.instant(text) else {
            lines.append("\(path): expected an ISO 8601 UTC time ending in Z, got \(render(actual))")
            return
        }
        guard let wantText = expected.stringValue, let want = GoldenTime.instant(wantText) else {
            lines.append("\(path): the corpus value is not an ISO 8601 time")
            return
        }
        if abs(got - want) > 0.000_5 { lines.append("\(path): expected \(wantText), got \(text)") }
    }

    private mutating func compareCard(_ id: String, _ expected: JSONValue, _ state: InMemoryWalletState) {
        let card = state.card(id)
        let path = "cards[\(id)]"
        switch expected {
        case .null:
            if let card { lines.append("\(path): expected absent, got \(card.state.rawValue)") }
        case .string(let wanted):
            if card?.state.rawValue != wanted {
                lines.append("\(path).state: expected \(wanted), got \(card?.state.rawValue ?? "absent")")
            }
        case .object(let want):
            guard let card else {
                lines.append("\(path): expected a card, got absent")
                return
            }
            if let wanted = want["state"]?.stringValue, wanted != card.state.rawValue {
                lines.append("\(path).state: expected \(wanted), got \(card.state.rawValue)")
            }
            if let wanted = want["tokenizedCardId"], wanted.stringValue != card.tokenizedCardId {
                lines.append("\(path).tokenizedCardId: expected \(render(wanted)), got \(quoted(card.tokenizedCardId))")
            }
            if let wanted = want["keyType"]?.stringValue, wanted != card.keyType.rawValue {
                lines.append("\(path).keyType: expected \(wanted), got \(card.keyType.rawValue)")
            }
            if let wanted = want["numberOfPaymentsLeft"]?.numberValue?.intValue,
                wanted != card.paymentKeys?.numberOfPaymentsLeft
            {
                lines.append(
                    "\(path).numberOfPaymentsLeft: expected \(wanted), got \(card.paymentKeys.map { "\($0.numberOfPaymentsLeft)" } ?? "no keys")"
                )
            }
            if let wanted = want["paymentKeysExpireAt"]?.stringValue, let instant = GoldenTime.instant(wanted),
                card.paymentKeys?.expiresAt != instant
            {
                lines.append(
                    "\(path).paymentKeys.expiresAt: expected \(wanted), got \(card.paymentKeys.map { "\($0.expiresAt)" } ?? "no keys")"
                )
            }
        default:
            lines.append("\(path): unreadable expectation")
        }
    }

    private mutating func compareInstallationEffect(_ expected: JSONValue, _ effects: [Effect]) {
        let actual = effects.filter {
            switch $0 {
            case .upsertInstallation, .deleteInstallation: true
            default: false
            }
        }
        let wanted: Effect?
        if let upsert = expected.objectValue?["upsert"]?.objectValue {
            wanted = .upsertInstallation(
                Installation(
                    installationId: upsert["installationId"]?.stringValue ?? "",
                    platform: upsert["platform"]?.stringValue ?? "",
                    pushChannel: upsert["pushChannel"]?.stringValue ?? "",
                    tags: upsert["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []))
        } else if let deleted = expected.objectValue?["delete"]?.stringValue {
            wanted = .deleteInstallation(installationId: deleted)
        } else {
            wanted = nil  // "none"
        }
        let expectedEffects = wanted.map { [$0] } ?? []
        if actual != expectedEffects {
            lines.append("installation effects: expected \(expectedEffects), got \(actual)")
        }
    }

    private func typeName(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "bool"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    private func render(_ value: JSONValue) -> String {
        let text = String(decoding: value.encoded(), as: UTF8.self)
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }

    private func quoted(_ value: String?) -> String {
        value.map { "\"\($0)\"" } ?? "null"
    }
}

/// Reads the corpus's ISO 8601 times (`…Z` or `±hh:mm`, optional fraction) as seconds since the epoch.
enum GoldenTime {
    static func instant(_ text: String) -> Double? {
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: text) { return date.timeIntervalSince1970 }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: text)?.timeIntervalSince1970
    }
}

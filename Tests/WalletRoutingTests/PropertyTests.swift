import Foundation
import PropertyBased
import TestSupport
import Testing
import WalletRouting

/// Properties of the routing core over random inputs. The golden corpus pins single cases down; these check that
/// no sequence or byte string escapes the contract.
@Suite("Routing properties")
struct PropertyTests {
    static let now = Date(timeIntervalSince1970: 1_795_248_000)  // 2026-11-21T08:00:00Z

    // MARK: - (a) CPS sequences against a reference model of §3's transition table

    @Test("random CPS sequences follow the §3 transition table", .cpuBound)
    func cpsSequencesFollowTheTransitionTable() async {
        await propertyCheck(count: 300, input: CPSGen.sequence) { steps in
            let router = NotificationRouter()
            var state = InMemoryWalletState()
            var model = CardModel()
            for (index, step) in steps.enumerated() {
                let messageID = "p\(index)"
                let message = InboundMessage(
                    body: step.body().encoded(), properties: InboundProperties(messageID: messageID))
                let decision: Decision
                do {
                    decision = try router.route(message, state: state, now: Self.now)
                } catch {
                    Issue.record("step \(index): route threw \(error)")
                    return
                }
                let expected = model.apply(step)
                let problems = CPSCheck.compare(expected, decision, messageID: messageID)
                state.apply(decision.effects)
                var stateProblems: [String] = []
                for card in CPSGen.cardIds where state.card(card)?.state != model.cards[card] {
                    stateProblems.append(
                        "\(card): model \(model.cards[card]?.rawValue ?? "absent"), store \(state.card(card)?.state.rawValue ?? "absent")"
                    )
                }
                if !(problems + stateProblems).isEmpty {
                    let body = String(decoding: message.body, as: UTF8.self)
                    Issue.record(
                        "step \(index) of \(steps.count): \(body)\n  - \((problems + stateProblems).joined(separator: "\n  - "))"
                    )
                    return
                }
            }
        }
    }

    // MARK: - (b) any body: results or a rejection, never a crash

    @Test("any byte string is answered or rejected")
    func anyBytesAreAnsweredOrRejected() async {
        await propertyCheck(count: 500, input: Gen<UInt8>.value(in: 0...255).array(of: 0...300), Gen.int(in: 0...2)) {
            bytes, typeChoice in
            let type = [nil, "DeviceInstallation", "DeviceInstallationDeleted"][typeChoice]
            DecisionInvariants.check(body: bytes, type: type, state: PropertyFixtures.state)
        }
    }

    @Test("mutated valid payloads are answered or rejected")
    func mutatedPayloadsAreAnsweredOrRejected() async {
        await propertyCheck(count: 1_000, input: MutationGen.mutatedPayload) { mutated in
            DecisionInvariants.check(body: mutated.bytes, type: mutated.type, state: PropertyFixtures.state)
        }
    }

    @Test("random JSON objects with SDK keys are answered or rejected")
    func randomObjectsAreAnsweredOrRejected() async {
        await propertyCheck(count: 500, input: JSONGen.sdkObject, Gen.int(in: 0...3)) { object, typeChoice in
            let type = [nil, nil, "DeviceInstallation", "DeviceInstallationDeleted"][typeChoice]
            DecisionInvariants.check(body: object.encoded(), type: type, state: PropertyFixtures.state)
        }
    }

    // MARK: - (c) result bodies round-trip through the parser and the writer

    @Test("result bodies round-trip through JSONParser and JSONWriter")
    func resultBodiesRoundTrip() async {
        await propertyCheck(count: 500, input: JSONGen.echoingPayload) { payload in
            let decision: Decision
            do {
                decision = try NotificationRouter().route(
                    InboundMessage(
                        body: payload.body.encoded(),
                        properties: InboundProperties(
                            messageID: payload.text, correlationID: payload.text, replyTo: "r", type: payload.type,
                            traceparent: payload.text)),
                    state: PropertyFixtures.state, now: Self.now)
            } catch {
                Issue.record("route threw \(error)")
                return
            }
            #expect(!decision.results.isEmpty || decision.outcome == .ignored)
            for result in decision.results {
                guard let value = try? JSONParser.parse(result.body) else {
                    Issue.record("result is not JSON: \(String(decoding: result.body, as: UTF8.self))")
                    continue
                }
                let rewritten = value.encoded()
                #expect((try? JSONParser.parse(rewritten)) == value, "re-encoded body parses to another value")
                #expect(rewritten == result.body, "the router's body is not the writer's compact form")
            }
        }
    }

    @Test("the CPS payload echo equals the parsed body")
    func unsupportedPushContentEchoesTheBody() async {
        await propertyCheck(count: 300, input: JSONGen.object(depth: 3)) { extra in
            // No usable serverMessage: the whole parsed body comes back in `payload` (§3).
            var members = extra.members.filter { !["sender", "serverMessage", "serverMessages"].contains($0.key) }
            members.insert(JSONObject.Member(key: "sender", value: .string("CPS")), at: 0)
            let body = JSONValue.object(JSONObject(members: members))
            guard
                let decision = try? NotificationRouter().route(
                    InboundMessage(body: body.encoded()), state: PropertyFixtures.state, now: Self.now),
                decision.results.count == 1,
                let result = try? JSONParser.parse(decision.results[0].body).objectValue
            else {
                Issue.record(
                    "expected one unsupportedPushContent result for \(String(decoding: body.encoded(), as: UTF8.self))")
                return
            }
            #expect(result["event"] == .string("unsupportedPushContent"))
            #expect(result["payload"] == body)
        }
    }

    @Test("JSONWriter output parses back to the same value")
    func writerRoundTrip() async {
        await propertyCheck(count: 1_000, input: JSONGen.value(depth: 4)) { value in
            let bytes = value.encoded()
            let parsed = try? JSONParser.parse(bytes)
            #expect(parsed == value, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }
}

// MARK: - Shared fixtures

enum PropertyFixtures {
    /// DC-1 active, DC-2 suspended, DC-3 deleted (with a LUK key type and a few records), one installation.
    static let state: InMemoryWalletState = {
        var state = InMemoryWalletState()
        state.apply([
            .upsertCard(CardRecord(digitalCardId: "DC-1", state: .active, tokenizedCardId: "TK-1")),
            .upsertCard(CardRecord(digitalCardId: "DC-2", state: .suspended, keyType: .luk)),
            .upsertCard(CardRecord(digitalCardId: "DC-3", state: .deleted)),
            .storeTransaction(
                digitalCardId: "DC-1",
                record: TransactionRecord(
                    id: "T-1", date: "2026-11-20T10:15:00Z", instant: 1_795_169_700, status: "approved",
                    type: "purchase",
                    currencyCode: "EUR", amount: JSONNumber(validatedLiteral: "12.50"))),
            .upsertInstallation(Installation(installationId: "inst-1", platform: "apns", pushChannel: "AB", tags: [])),
        ])
        return state
    }()
}

/// What every decision must satisfy, whatever the input (CONTRACT.md §8, §9).
enum DecisionInvariants {
    static func check(
        body: [UInt8], type: String?, state: InMemoryWalletState,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let properties = InboundProperties(messageID: "mid", type: type)
        let decision: Decision
        do {
            decision = try NotificationRouter().route(
                InboundMessage(body: body, properties: properties), state: state,
                now: PropertyTests.now)
        } catch {
            Issue.record("route threw \(error) (InMemoryWalletState never fails)", sourceLocation: sourceLocation)
            return
        }
        var problems: [String] = []
        switch decision.disposition {
        case .deadLetter(let reason):
            if decision.outcome != .rejected { problems.append("dead-lettered with outcome \(decision.outcome)") }
            if reason.isEmpty { problems.append("empty dead-letter reason") }
            if !decision.effects.isEmpty { problems.append("a rejected message has effects") }
            if decision.results.count != 1 || decision.results.first?.routingKey != "notification.rejected" {
                problems.append("a rejected message publishes exactly one notification.rejected result")
            }
        case .acknowledge:
            if decision.outcome == .rejected { problems.append("outcome rejected but acknowledged") }
            if decision.outcome == .ignored, !decision.results.isEmpty { problems.append("ignored but published") }
            if decision.outcome != .ignored, decision.results.isEmpty { problems.append("nothing published") }
        }
        for (index, result) in decision.results.enumerated() {
            guard let object = (try? JSONParser.parse(result.body))?.objectValue else {
                problems.append("result \(index) is not a JSON object")
                continue
            }
            if object["kind"] != .string(result.properties.type) { problems.append("result \(index): kind != type") }
            if result.properties.messageID != "mid/\(index)" {
                problems.append("result \(index): message id \(result.properties.messageID ?? "nil")")
            }
            if object["messageId"] != .string("mid") { problems.append("result \(index): messageId") }
            guard case .string(let processedAt)? = object["processedAt"], processedAt.hasSuffix("Z") else {
                problems.append("result \(index): processedAt")
                continue
            }
        }
        if !problems.isEmpty {
            let text = String(decoding: body.prefix(500), as: UTF8.self)
            Issue.record(
                "\(problems.joined(separator: "; ")) for type \(type ?? "nil") body \(text)",
                sourceLocation: sourceLocation)
        }
    }
}

// MARK: - CPS generators and the reference model

struct CPSStep: Sendable, CustomStringConvertible {
    var card: String
    /// Server message codes; empty means an unusable (empty) stack.
    var codes: [String]
    var tokenizedCardId: String?
    var singleForm: Bool

    func body() -> JSONValue {
        var members: [JSONObject.Member] = [
            .init(key: "sender", value: .string("CPS")),
            .init(key: "digitalCardId", value: .string(card)),
        ]
        if let tokenizedCardId { members.append(.init(key: "tokenizedCardId", value: .string(tokenizedCardId))) }
        let messages = codes.map { code in
            JSONValue.object(
                JSONObject(members: [
                    .init(key: "code", value: .string(code)), .init(key: "severity", value: .string("info")),
                ]))
        }
        if singleForm, messages.count == 1 {
            members.append(.init(key: "serverMessage", value: messages[0]))
        } else {
            members.append(.init(key: "serverMessages", value: .array(messages)))
        }
        return .object(JSONObject(members: members))
    }

    var description: String { "\(card) \(codes)\(tokenizedCardId.map { " tk \($0)" } ?? "")" }
}

enum CPSGen {
    static let cardIds = ["DC-1", "DC-2", "DC-3"]
    static let codePool = [
        "CBP.info.tokenProvisioned", "CBP.info.tokenSuspended", "CBP.info.tokenResumed", "CBP.info.tokenDeleted",
        "CBP.info.tokenReplenished", "CBP.info.tokenRenewed", "CBP.info.tokenODACertRenewed",
        "CBP.info.paymentAccepted", "CBP.error.pinLocked", "cbp.info.tokenSuspended",
    ]

    /// Known codes are drawn far more often than unknown ones, so cards get somewhere.
    static let code = zip(Gen.int(in: 0...(codePool.count + 1)), Gen.letterOrNumber.string(of: 1...6)).map {
        index, suffix in
        index < codePool.count ? codePool[index] : "CBP.x.\(suffix)"
    }

    static let step = zip(
        Gen.int(in: 0...(cardIds.count - 1)), code.array(of: 0...4), Gen.int(in: 0...3), Gen.bool
    ).map { card, codes, token, single in
        CPSStep(
            card: cardIds[card], codes: codes, tokenizedCardId: token == 0 ? nil : "TK-\(token)", singleForm: single)
    }

    static let sequence = step.array(of: 1...30)
}

/// One expected CPS result, as the reference model sees it.
enum ExpectedCardEvent: Equatable, CustomStringConvertible {
    case serverMessage(code: String, known: String?, previous: CardState?, state: CardState?, changed: Bool)
    case completed(state: CardState?)
    case errorEncountered(code: String, state: CardState?, kind: String, errorCode: Int)
    case unsupportedPushContent

    var description: String {
        switch self {
        case .serverMessage(let code, _, let previous, let state, let changed):
            "serverMessage(\(code): \(previous?.rawValue ?? "absent") -> \(state?.rawValue ?? "absent"), changed \(changed))"
        case .completed(let state): "completed(\(state?.rawValue ?? "absent"))"
        case .errorEncountered(let code, let state, let kind, let errorCode):
            "errorEncountered(\(code) on \(state?.rawValue ?? "absent"): \(kind)/\(errorCode))"
        case .unsupportedPushContent: "unsupportedPushContent"
        }
    }
}

/// CONTRACT.md §3's table, written independently of the implementation.
struct CardModel {
    var cards: [String: CardState] = [:]

    static let known: [String: String] = [
        "CBP.info.tokenProvisioned": "requestInstallCard", "CBP.info.tokenSuspended": "requestSuspendCard",
        "CBP.info.tokenResumed": "requestResumeCard", "CBP.info.tokenDeleted": "requestDeleteCard",
        "CBP.info.tokenReplenished": "requestReplenishKeys", "CBP.info.tokenRenewed": "requestRenewCard",
        "CBP.info.tokenODACertRenewed": "requestRenewODACert",
    ]

    /// The next state, or nil when the transition is an error.
    static func transition(_ code: String, from state: CardState?) -> CardState?? {
        switch (code, state) {
        case ("CBP.info.tokenProvisioned", nil), ("CBP.info.tokenProvisioned", .active?): return .some(.active)
        case ("CBP.info.tokenSuspended", .active?), ("CBP.info.tokenSuspended", .suspended?): return .some(.suspended)
        case ("CBP.info.tokenResumed", .suspended?), ("CBP.info.tokenResumed", .active?): return .some(.active)
        case ("CBP.info.tokenDeleted", .active?), ("CBP.info.tokenDeleted", .suspended?),
            ("CBP.info.tokenDeleted", .deleted?):
            return .some(.deleted)
        case ("CBP.info.tokenReplenished", .active?): return .some(.active)
        case ("CBP.info.tokenRenewed", .active?), ("CBP.info.tokenRenewed", .suspended?),
            ("CBP.info.tokenODACertRenewed", .active?), ("CBP.info.tokenODACertRenewed", .suspended?):
            return .some(state)
        default:
            return known[code] == nil ? .some(state) : .none  // informational codes never fail
        }
    }

    mutating func apply(_ step: CPSStep) -> [ExpectedCardEvent] {
        guard !step.codes.isEmpty else { return [.unsupportedPushContent] }
        var events: [ExpectedCardEvent] = []
        var current = cards[step.card]
        for code in step.codes {
            guard case .some(let next) = Self.transition(code, from: current) else {
                let kind = current == nil ? "unknownDigitalCardID" : "cardStateDoesNotAllowRequestedOperation"
                events.append(
                    .errorEncountered(code: code, state: current, kind: kind, errorCode: current == nil ? 524 : 561))
                cards[step.card] = current
                return events
            }
            events.append(
                .serverMessage(
                    code: code, known: Self.known[code], previous: current, state: next,
                    changed: next != current))
            current = next
        }
        cards[step.card] = current
        events.append(.completed(state: current))
        return events
    }
}

enum CPSCheck {
    static func compare(_ expected: [ExpectedCardEvent], _ decision: Decision, messageID: String) -> [String] {
        var problems: [String] = []
        if decision.disposition != .acknowledge { problems.append("disposition \(decision.disposition)") }
        let actual = decision.results.enumerated().map { index, result -> ExpectedCardEvent? in
            guard result.exchange == "wallet.events", result.properties.messageID == "\(messageID)/\(index)",
                let body = (try? JSONParser.parse(result.body))?.objectValue, body["kind"] == .string("cardEvent")
            else { return nil }
            let state = body["state"]?.stringValue.flatMap(CardState.init(rawValue:))
            switch body["event"]?.stringValue {
            case "serverMessage":
                let code = body["serverMessage"]?.objectValue?["code"]?.stringValue ?? "?"
                let known = body["knownMessage"]?.stringValue
                guard result.routingKey == "card.serverMessage.\(known ?? "informational")" else { return nil }
                return .serverMessage(
                    code: code, known: known,
                    previous: body["previousState"]?.stringValue.flatMap(CardState.init(rawValue:)),
                    state: state, changed: body["changed"] == .bool(true))
            case "completed":
                return result.routingKey == "card.completed" ? .completed(state: state) : nil
            case "errorEncountered":
                let error = body["error"]?.objectValue
                guard result.routingKey == "card.errorEncountered" else { return nil }
                return .errorEncountered(
                    code: body["serverMessage"]?.objectValue?["code"]?.stringValue ?? "?",
                    state: state, kind: error?["kind"]?.stringValue ?? "?",
                    errorCode: error?["code"]?.numberValue?.intValue ?? -1)
            case "unsupportedPushContent":
                return result.routingKey == "card.unsupportedPushContent" ? .unsupportedPushContent : nil
            default:
                return nil
            }
        }
        if actual.count != expected.count || zip(actual, expected).contains(where: { $0 != $1 }) {
            problems.append("expected \(expected), got \(actual.map { $0?.description ?? "unreadable result" })")
        }
        return problems
    }
}

// MARK: - Byte-level mutations of valid payloads

struct MutatedPayload: Sendable, CustomStringConvertible {
    var bytes: [UInt8]
    var type: String?
    var description: String { "type \(type ?? "nil"): \(String(decoding: bytes, as: UTF8.self))" }
}

enum MutationGen {
    static let seeds: [(type: String?, body: String)] = [
        (
            nil,
            #"{"sender":"CPS","digitalCardId":"DC-1","tokenizedCardId":"TK-1","serverMessage":{"code":"CBP.info.tokenSuspended","text":"Card suspended","severity":"info","params":[]}}"#
        ),
        (
            nil,
            #"{"sender":"CPS","digitalCardID":"DC-2","serverMessages":[{"code":"CBP.info.tokenResumed"},{"code":"CBP.info.tokenDeleted","severity":"WARNING","params":[1,"x"]}],"keyType":"LUK"}"#
        ),
        (
            nil,
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1","transactionRecordType":"primary","transaction":{"id":"T-9","date":"2026-11-20T10:15:00+01:00","status":"approved","type":"purchase","currencyCode":"EUR","amount":12.50,"merchantName":"Cafe","isAuxiliaryTransaction":false}}"#
        ),
        (nil, #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#),
        (
            nil,
            #"{"action":"refreshWallet","aps":{"content-available":1,"alert":{"title":"t","body":"b"}},"message":"m"}"#
        ),
        (
            "DeviceInstallation",
            #"{"installationId":"inst-2","platform":"apns","pushChannel":"a1b2c3d4","tags":["user:42"]}"#
        ),
        ("DeviceInstallationDeleted", #"{"installationId":"inst-1"}"#),
    ]

    /// Bytes that change the JSON structure when inserted.
    static let interesting: [UInt8] = Array(#"{}[]":,\ 0-1e.tfnu"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xE2, 0xFF]

    /// One edit: kind 0 deletes a run, 1 inserts a structural byte, 2 overwrites with any byte, 3 duplicates a run,
    /// 4 truncates.
    static let edit = zip(
        Gen.int(in: 0...4), Gen.int(in: 0...10_000), Gen.int(in: 1...8), Gen<UInt8>.value(in: 0...255))

    static let mutatedPayload = zip(Gen.int(in: 0...(seeds.count - 1)), edit.array(of: 1...4)).map { seedIndex, edits in
        var bytes = Array(seeds[seedIndex].body.utf8)
        for (kind, position, length, byte) in edits {
            let at = bytes.isEmpty ? 0 : position % bytes.count
            switch kind {
            case 0: bytes.removeSubrange(at..<min(bytes.count, at + length))
            case 1: bytes.insert(interesting[Int(byte) % interesting.count], at: at)
            case 2: if !bytes.isEmpty { bytes[at] = byte }
            case 3: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + length)], at: at)
            default: bytes.removeSubrange(at...)
            }
        }
        return MutatedPayload(bytes: bytes, type: seeds[seedIndex].type)
    }
}

// MARK: - JSON values

struct EchoingPayload: Sendable, CustomStringConvertible {
    var body: JSONValue
    var type: String?
    var text: String
    var description: String {
        "type \(type ?? "nil"), text \(text.debugDescription): \(String(decoding: body.encoded(), as: UTF8.self))"
    }
}

enum JSONGen {
    /// Characters that stress escaping: controls, quotes, backslashes, multi-byte scalars, line separators.
    static let scalars: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{1}", "\u{8}", "\u{9}", "\u{A}",
        "\u{C}", "\u{D}", "\u{1F}", "\u{7F}", "é", "€", "😀", "\u{2028}", "\u{FEFF}",
        "\u{FFFF}", "\u{10FFFF}", ":", "-",
    ]
    static let numbers = [
        "0", "-0", "1", "-1", "12.50", "1e3", "1E+3", "-1.5e-7", "123456789012345678901234567890",
        "0.000001", "9007199254740993", "3.14159",
    ]

    static let string = Gen.int(in: 0...(scalars.count - 1)).array(of: 0...12).map { indices in
        var text = String.UnicodeScalarView()
        text.append(contentsOf: indices.map { scalars[$0] })
        return String(text)
    }

    static func value(depth: Int) -> Generator<JSONValue, Shrink.None<JSONValue>> {
        Generator(run: { rng in randomValue(depth: depth, using: &rng) })
    }

    static func object(depth: Int) -> Generator<JSONObject, Shrink.None<JSONObject>> {
        Generator(run: { rng in randomObject(depth: depth, using: &rng) })
    }

    /// An object whose SDK keys hold random values of random types, with random key spellings.
    static let sdkObject: Generator<JSONValue, Shrink.None<JSONValue>> = Generator(run: { rng in
        let keys = [
            "sender", "SENDER", "action", "Action", "digitalCardId", "digitalCardID", "transactionRecordType",
            "transaction", "serverMessage", "serverMessages", "tokenizedCardId", "keyType", "aps", "message",
            "installationId", "platform", "pushChannel", "tags",
        ]
        let senders: [JSONValue] = [
            .string("CPS"), .string("tns"), .string("Mg"), .string("other"), .null, .number(JSONNumber(1)),
        ]
        let actions: [JSONValue] = [
            .string("TNS:PaymentTransactionNotification"), .string("MG:ReplenishmentNeededNotification"),
            .string(""), .string("go"), .null,
        ]
        var members: [JSONObject.Member] = []
        for key in keys where Bool.random(using: &rng) {
            let value: JSONValue
            switch key.lowercased() {
            case "sender": value = senders.randomElement(using: &rng)!
            case "action":
                value =
                    Bool.random(using: &rng) ? actions.randomElement(using: &rng)! : randomValue(depth: 1, using: &rng)
            case "digitalcardid":
                value =
                    Bool.random(using: &rng)
                    ? .string(["DC-1", "DC-2", "DC-3", "DC-9"].randomElement(using: &rng)!)
                    : randomValue(depth: 1, using: &rng)
            default: value = randomValue(depth: 2, using: &rng)
            }
            members.append(.init(key: key, value: value))
        }
        return .object(JSONObject(members: members.shuffled(using: &rng)))
    })

    /// Valid payloads whose echoed fields (action, message, server message text and params, installation id,
    /// CPS payload) carry random strings and values.
    static let echoingPayload: Generator<EchoingPayload, Shrink.None<EchoingPayload>> = Generator(run: { rng in
        let text = randomString(using: &rng)
        let nonEmpty = text.isEmpty ? "x" : text
        let value = randomValue(depth: 2, using: &rng)
        func object(_ pairs: [(String, JSONValue)]) -> JSONValue {
            .object(JSONObject(members: pairs.map { JSONObject.Member(key: $0.0, value: $0.1) }))
        }
        switch Int.random(in: 0...5, using: &rng) {
        case 0:
            return EchoingPayload(
                body: object([
                    ("action", .string(nonEmpty)), ("aps", object([("alert", value)])),
                    ("message", .string(text)),
                ]), type: nil, text: text)
        case 1:
            return EchoingPayload(
                body: object([
                    ("sender", .string("CPS")), ("digitalCardId", .string(nonEmpty)),
                    ("tokenizedCardId", .string(text)),
                    (
                        "serverMessage",
                        object([
                            ("code", .string(nonEmpty)), ("text", .string(text)), ("severity", value),
                            ("params", .array([value, .string(text)])),
                        ])
                    ),
                ]), type: nil, text: text)
        case 2:
            return EchoingPayload(
                body: object([
                    ("sender", .string("CPS")), ("digitalCardId", .string(text)),
                    (nonEmpty, value), ("nested", object([(text, value)])),
                ]),
                type: nil, text: text)
        case 3:
            return EchoingPayload(
                body: object([
                    ("installationId", .string(nonEmpty)), ("platform", .string("fcm")),
                    ("pushChannel", .string(nonEmpty)),
                ]),
                type: "DeviceInstallation", text: text)
        case 4:
            return EchoingPayload(
                body: object([
                    ("sender", .string("TNS")), ("action", .string("TNS:PaymentTransactionNotification")),
                    ("digitalCardId", .string(Bool.random(using: &rng) ? "DC-1" : nonEmpty)),
                    (
                        "transaction",
                        object([
                            ("id", .string(nonEmpty)), ("date", .string("2026-11-20T10:15:00Z")),
                            ("status", .string("approved")), ("type", .string("purchase")),
                            ("currencyCode", .string("EUR")),
                            ("amount", .number(JSONNumber(validatedLiteral: numbers.randomElement(using: &rng)!))),
                            ("merchantName", .string(text)),
                        ])
                    ),
                ]),
                type: nil, text: text)
        default:
            return EchoingPayload(
                body: object([("sender", .string(text)), ("action", .string(nonEmpty))]), type: nil, text: text)
        }
    })

    static func randomString(using rng: inout some RandomNumberGenerator) -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) { text.append(scalars.randomElement(using: &rng)!) }
        return String(text)
    }

    static func randomValue(depth: Int, using rng: inout some RandomNumberGenerator) -> JSONValue {
        switch Int.random(in: 0...(depth > 0 ? 6 : 4), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .number(JSONNumber(validatedLiteral: numbers.randomElement(using: &rng)!))
        case 3, 4: return .string(randomString(using: &rng))
        case 5:
            return .array(
                (0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(depth: depth - 1, using: &rng) })
        default: return .object(randomObject(depth: depth - 1, using: &rng))
        }
    }

    static func randomObject(depth: Int, using rng: inout some RandomNumberGenerator) -> JSONObject {
        JSONObject(
            members: (0..<Int.random(in: 0...5, using: &rng)).map { _ in
                JSONObject.Member(key: randomString(using: &rng), value: randomValue(depth: max(depth, 0), using: &rng))
            })
    }
}

import Foundation
import Testing

@testable import WalletRouting

@Suite("CPS: card lifecycle (CONTRACT.md §3)")
struct CPSTests {
    /// One row of the contract's transition table, for one starting state.
    struct Row: Sendable, CustomTestStringConvertible {
        var code: String
        var knownMessage: String?
        var from: CardState?
        /// The resulting state, or the error code (524, 561) when refused.
        var expected: Expected

        enum Expected: Sendable, Equatable {
            case state(CardState?)
            case error(Int)
        }

        var testDescription: String { "\(code) from \(from?.rawValue ?? "absent") → \(expected)" }
    }

    static let rows: [Row] = {
        let table: [(String, String?, [CardState?: Row.Expected])] = [
            (
                "CBP.info.tokenProvisioned", "requestInstallCard",
                [nil: .state(.active), .active: .state(.active), .suspended: .error(561), .deleted: .error(561)]
            ),
            (
                "CBP.info.tokenSuspended", "requestSuspendCard",
                [nil: .error(524), .active: .state(.suspended), .suspended: .state(.suspended), .deleted: .error(561)]
            ),
            (
                "CBP.info.tokenResumed", "requestResumeCard",
                [nil: .error(524), .active: .state(.active), .suspended: .state(.active), .deleted: .error(561)]
            ),
            (
                "CBP.info.tokenDeleted", "requestDeleteCard",
                [nil: .error(524), .active: .state(.deleted), .suspended: .state(.deleted), .deleted: .state(.deleted)]
            ),
            (
                "CBP.info.tokenReplenished", "requestReplenishKeys",
                [nil: .error(524), .active: .state(.active), .suspended: .error(561), .deleted: .error(561)]
            ),
            (
                "CBP.info.tokenRenewed", "requestRenewCard",
                [nil: .error(524), .active: .state(.active), .suspended: .state(.suspended), .deleted: .error(561)]
            ),
            (
                "CBP.info.tokenODACertRenewed", "requestRenewODACert",
                [nil: .error(524), .active: .state(.active), .suspended: .state(.suspended), .deleted: .error(561)]
            ),
            (
                "CBP.info.paymentAccepted", nil,
                [
                    nil: .state(nil), .active: .state(.active), .suspended: .state(.suspended),
                    .deleted: .state(.deleted),
                ]
            ),
            (
                "CBP.error.pinLocked", nil,
                [
                    nil: .state(nil), .active: .state(.active), .suspended: .state(.suspended),
                    .deleted: .state(.deleted),
                ]
            ),
            // Codes are matched exactly: a different case is informational.
            (
                "cbp.info.tokenProvisioned", nil,
                [
                    nil: .state(nil), .active: .state(.active), .suspended: .state(.suspended),
                    .deleted: .state(.deleted),
                ]
            ),
        ]
        return table.flatMap { code, known, outcomes in
            [CardState?.none, .active, .suspended, .deleted].map { from in
                Row(code: code, knownMessage: known, from: from, expected: outcomes[from]!)
            }
        }
    }()

    static func payload(_ code: String, card: String = "DC-1", extra: String = "") -> String {
        #"{"sender":"CPS","digitalCardId":"\#(card)"\#(extra),"serverMessage":{"code":"\#(code)","text":"t","severity":"info","params":[]}}"#
    }

    @Test(arguments: rows)
    func transitionTable(_ row: Row) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", row.from, tokenizedCardId: "TK-0")
        let decision = try wallet.send(Self.payload(row.code))
        let bodies = try decision.bodies
        #expect(decision.disposition == .acknowledge)
        #expect(decision.sender == "CPS")
        #expect(decision.digitalCardId == "DC-1")
        #expect(decision.primaries.allSatisfy { $0.exchange == "wallet.events" })
        #expect(bodies.allSatisfy { $0.string("kind") == "cardEvent" })

        switch row.expected {
        case .state(let state):
            #expect(decision.outcome == .processed)
            #expect(bodies.count == 2)
            let event = bodies[0]
            #expect(event.string("event") == "serverMessage")
            #expect(event.string("digitalCardId") == "DC-1")
            #expect(event["knownMessage"] == row.knownMessage.map(JSONValue.string) ?? .null)
            #expect(event["previousState"] == row.from.map { .string($0.rawValue) } ?? .null)
            #expect(event["state"] == state.map { .string($0.rawValue) } ?? .null)
            #expect(event.bool("changed") == (row.from != state))
            #expect(decision.primaries[0].routingKey == "card.serverMessage.\(row.knownMessage ?? "informational")")
            #expect(bodies[1].string("event") == "completed")
            #expect(bodies[1]["state"] == state.map { .string($0.rawValue) } ?? .null)
            #expect(decision.primaries[1].routingKey == "card.completed")
            #expect(wallet.state.card("DC-1")?.state == state)
        case .error(let code):
            #expect(decision.outcome == .domainError)
            #expect(bodies.count == 1)
            let event = bodies[0]
            #expect(event.string("event") == "errorEncountered")
            #expect(decision.primaries[0].routingKey == "card.errorEncountered")
            #expect(event.string("knownMessage") == row.knownMessage)
            #expect(event["state"] == row.from.map { .string($0.rawValue) } ?? .null)
            #expect(event.object("serverMessage")?.string("code") == row.code)
            let error = try #require(event.object("error"))
            #expect(error["code"] == .number(JSONNumber(code)))
            #expect(
                error.string("kind")
                    == (code == 524 ? "unknownDigitalCardID" : "cardStateDoesNotAllowRequestedOperation"))
            #expect(error.string("message")?.isEmpty == false)
            #expect(decision.effects.isEmpty)
            #expect(wallet.state.card("DC-1")?.state == row.from)
        }
    }

    @Test func eventFieldsInContractOrder() throws {
        var wallet = Wallet()
        let decision = try wallet.send(Self.payload("CBP.info.tokenProvisioned", extra: #","tokenizedCardId":"TK-1""#))
        let bodies = try decision.bodies
        #expect(
            bodies[0].keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "event", "digitalCardId",
                "tokenizedCardId", "serverMessage", "knownMessage", "previousState", "state", "changed",
            ])
        #expect(
            bodies[1].keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "event", "digitalCardId",
                "tokenizedCardId", "state",
            ])
        #expect(bodies[0].string("tokenizedCardId") == "TK-1")
        #expect(bodies[1].string("tokenizedCardId") == "TK-1")

        wallet.seed("DC-2", .deleted)
        let refused = try wallet.send(Self.payload("CBP.info.tokenResumed", card: "DC-2"))
        #expect(
            try refused.bodies[0].keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "event",
                "digitalCardId", "tokenizedCardId", "serverMessage", "knownMessage",
                "state", "error",
            ])
        #expect(try refused.bodies[0].object("error")?.keys == ["kind", "code", "message"])
    }

    @Test func stackIsAppliedInOrder() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","serverMessages":[
              {"code":"CBP.info.tokenProvisioned"},{"code":"CBP.info.tokenSuspended"},
              {"code":"CBP.info.paymentAccepted"},{"code":"CBP.info.tokenResumed"}]}
            """#)
        let bodies = try decision.bodies
        #expect(
            bodies.map { $0.string("event") } == [
                "serverMessage", "serverMessage", "serverMessage", "serverMessage", "completed",
            ])
        #expect(
            bodies.map { $0["previousState"] ?? .string("-") } == [
                .null, .string("active"), .string("suspended"), .string("suspended"), .string("-"),
            ])
        #expect(bodies.map { $0.string("state") } == ["active", "suspended", "suspended", "active", "active"])
        #expect(bodies.dropLast().map { $0.bool("changed") } == [true, true, false, true])
        #expect(
            decision.primaries.map(\.routingKey) == [
                "card.serverMessage.requestInstallCard", "card.serverMessage.requestSuspendCard",
                "card.serverMessage.informational", "card.serverMessage.requestResumeCard", "card.completed",
            ])
        #expect(decision.effects.count == 1)
        #expect(wallet.state.card("DC-1")?.state == .active)
    }

    @Test func errorMidStackStopsAndKeepsWhatWasApplied() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","tokenizedCardId":"TK-1","serverMessages":[
              {"code":"CBP.info.tokenProvisioned"},{"code":"CBP.info.tokenDeleted"},
              {"code":"CBP.info.tokenResumed","text":"resume"},{"code":"CBP.info.tokenProvisioned"}]}
            """#)
        let bodies = try decision.bodies
        #expect(bodies.map { $0.string("event") } == ["serverMessage", "serverMessage", "errorEncountered"])
        #expect(decision.outcome == .domainError)
        #expect(decision.disposition == .acknowledge)
        let error = bodies[2]
        #expect(error.string("state") == "deleted")
        #expect(error.string("knownMessage") == "requestResumeCard")
        #expect(error.string("tokenizedCardId") == "TK-1")
        #expect(error.object("serverMessage")?.string("text") == "resume")
        #expect(error.object("error")?["code"] == .number(JSONNumber(561)))
        #expect(
            wallet.state.card("DC-1") == CardRecord(digitalCardId: "DC-1", state: .deleted, tokenizedCardId: "TK-1"))
    }

    @Test func errorOnFirstMessageAppliesNothing() throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .suspended, tokenizedCardId: "TK-0")
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","tokenizedCardId":"TK-9","serverMessages":[
              {"code":"CBP.info.tokenReplenished"},{"code":"CBP.info.tokenResumed"}]}
            """#)
        let bodies = try decision.bodies
        #expect(bodies.map { $0.string("event") } == ["errorEncountered"])
        #expect(bodies[0].string("tokenizedCardId") == "TK-9")  // from the payload
        #expect(decision.effects.isEmpty)
        #expect(wallet.state.card("DC-1")?.tokenizedCardId == "TK-0")  // not recorded: nothing applied
    }

    /// The stack is validated as a whole: one bad element makes the payload unusable, nothing is applied.
    @Test(arguments: [
        #""serverMessages":[]"#,
        #""serverMessages":{"code":"CBP.info.tokenProvisioned"}"#,
        #""serverMessages":"CBP.info.tokenProvisioned""#,
        #""serverMessages":[{"code":"CBP.info.tokenProvisioned"},{"text":"no code"}]"#,
        #""serverMessages":[{"code":"CBP.info.tokenProvisioned"},{"code":""}]"#,
        #""serverMessages":[{"code":"CBP.info.tokenProvisioned"},{"code":7}]"#,
        #""serverMessages":[{"code":"CBP.info.tokenProvisioned"},"CBP.info.tokenSuspended"]"#,
        #""serverMessages":[{"code":"CBP.info.tokenProvisioned"},null]"#,
        #""serverMessage":{"code":""}"#,
        #""serverMessage":{"code":null}"#,
        #""serverMessage":[{"code":"CBP.info.tokenProvisioned"}]"#,
        #""serverMessage":null"#,
        #""serverMessage":"CBP.info.tokenProvisioned""#,
        #""other":1"#,
        // serverMessages wins over a valid serverMessage.
        #""serverMessages":[],"serverMessage":{"code":"CBP.info.tokenProvisioned"}"#,
    ])
    func unusableStackIsUnsupportedPushContent(_ members: String) throws {
        var wallet = Wallet()
        let json = #"{"sender":"CPS","digitalCardId":"DC-1",\#(members)}"#
        let decision = try wallet.send(json)
        let bodies = try decision.bodies
        #expect(bodies.count == 1)
        #expect(bodies[0].string("event") == "unsupportedPushContent")
        #expect(bodies[0].string("digitalCardId") == "DC-1")
        #expect(bodies[0]["payload"] == (try JSONValue(json: json)))
        #expect(decision.primaries[0].routingKey == "card.unsupportedPushContent")
        #expect(decision.disposition == .acknowledge)
        #expect(decision.outcome == .processed)
        #expect(decision.effects.isEmpty)
        #expect(wallet.state.card("DC-1") == nil)
    }

    @Test(arguments: [#""#, #","digitalCardId":null"#, #","digitalCardId":"""#, #","digitalCardId":42"#])
    func missingDigitalCardIdIsUnsupportedPushContent(_ member: String) throws {
        var wallet = Wallet()
        let json = #"{"sender":"CPS"\#(member),"serverMessage":{"code":"CBP.info.tokenProvisioned"}}"#
        let decision = try wallet.send(json)
        let body = try #require(try decision.bodies.first)
        #expect(body.string("event") == "unsupportedPushContent")
        #expect(body.isNull("digitalCardId"))
        #expect(body["payload"] == (try JSONValue(json: json)))
        #expect(decision.disposition == .acknowledge)
        #expect(decision.effects.isEmpty)
    }

    @Test func serverMessagesWinsOverServerMessage() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"CBP.info.tokenSuspended"},
             "serverMessages":[{"code":"CBP.info.tokenProvisioned"}]}
            """#)
        #expect(try decision.bodies.map { $0.string("state") } == ["active", "active"])
    }

    @Test func nullServerMessagesMeansAbsent() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","serverMessages":null,"serverMessage":{"code":"CBP.info.tokenProvisioned"}}
            """#)
        #expect(try decision.bodies.map { $0.string("event") } == ["serverMessage", "completed"])
    }

    @Test(arguments: [
        (
            #"{"code":"X.1","text":"hello","severity":"WARNING","params":["a",1]}"#,
            #"{"code":"X.1","text":"hello","severity":"warning","params":["a",1]}"#
        ),
        (#"{"code":"X.1"}"#, #"{"code":"X.1","text":null,"severity":"unknown","params":[]}"#),
        (
            #"{"params":null,"severity":"fatal","code":"X.1","extra":true,"text":null}"#,
            #"{"code":"X.1","text":null,"severity":"unknown","params":[]}"#
        ),
        (
            #"{"code":"X.1","severity":"Info","params":{"k":"v"},"text":{"t":1}}"#,
            #"{"code":"X.1","text":{"t":1},"severity":"info","params":{"k":"v"}}"#
        ),
        (#"{"code":"X.1","severity":"error"}"#, #"{"code":"X.1","text":null,"severity":"error","params":[]}"#),
        (#"{"code":"X.1","severity":"UNKNOWN"}"#, #"{"code":"X.1","text":null,"severity":"unknown","params":[]}"#),
        (#"{"code":"X.1","severity":3}"#, #"{"code":"X.1","text":null,"severity":"unknown","params":[]}"#),
        (#"{"code":"X.1","severity":" info"}"#, #"{"code":"X.1","text":null,"severity":"unknown","params":[]}"#),
    ])
    func serverMessageIsEchoedNormalised(_ received: String, _ echoed: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":\#(received)}"#)
        let event = try #require(try decision.bodies.first)
        #expect(event["serverMessage"] == (try JSONValue(json: echoed)))
        #expect(event["serverMessage"]?.encoded() == Array(echoed.utf8))
    }

    @Test(arguments: [("LUK", KeyType.luk), ("luk", .luk), ("SUK", .suk), ("suk", .suk), ("XYZ", .suk), ("", .suk)])
    func keyTypeOnTheInstallThatCreatesTheCard(_ value: String, _ expected: KeyType) throws {
        var wallet = Wallet()
        try wallet.send(Self.payload("CBP.info.tokenProvisioned", extra: #","keyType":"\#(value)""#))
        #expect(wallet.state.card("DC-1")?.keyType == expected)
    }

    @Test func keyTypeOnALaterMessageIsIgnored() throws {
        var wallet = Wallet()
        try wallet.send(Self.payload("CBP.info.tokenProvisioned"))
        try wallet.send(Self.payload("CBP.info.tokenProvisioned", extra: #","keyType":"LUK""#))
        #expect(wallet.state.card("DC-1")?.keyType == .suk)
        try wallet.send(Self.payload("CBP.info.tokenProvisioned", card: "DC-2", extra: #","keyType":5"#))
        #expect(wallet.state.card("DC-2")?.keyType == .suk)
    }

    @Test func tokenizedCardIdBookkeeping() throws {
        var wallet = Wallet()
        try wallet.send(Self.payload("CBP.info.tokenProvisioned", extra: #","tokenizedCardId":"TK-1""#))
        #expect(wallet.state.card("DC-1")?.tokenizedCardId == "TK-1")

        // Absent from the payload: the recorded one is reported and kept.
        var decision = try wallet.send(Self.payload("CBP.info.tokenSuspended"))
        #expect(try decision.bodies.map { $0.string("tokenizedCardId") } == ["TK-1", "TK-1"])
        #expect(wallet.state.card("DC-1")?.tokenizedCardId == "TK-1")

        // A new one in a message that applies is recorded, informational messages included.
        decision = try wallet.send(Self.payload("CBP.info.paymentAccepted", extra: #","tokenizedCardId":"TK-2""#))
        #expect(try decision.bodies.map { $0.string("tokenizedCardId") } == ["TK-2", "TK-2"])
        #expect(wallet.state.card("DC-1")?.tokenizedCardId == "TK-2")

        // null and non-strings are absent.
        decision = try wallet.send(Self.payload("CBP.info.tokenResumed", extra: #","tokenizedCardId":null"#))
        #expect(try decision.bodies.map { $0.string("tokenizedCardId") } == ["TK-2", "TK-2"])

        // A refused message does not record it.
        wallet.seed("DC-3", .deleted, tokenizedCardId: "TK-OLD")
        decision = try wallet.send(
            Self.payload("CBP.info.tokenSuspended", card: "DC-3", extra: #","tokenizedCardId":"TK-NEW""#))
        #expect(try decision.bodies[0].string("tokenizedCardId") == "TK-NEW")
        #expect(wallet.state.card("DC-3")?.tokenizedCardId == "TK-OLD")
    }

    @Test func informationalOnAnAbsentCardCreatesNothing() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            Self.payload("CBP.info.paymentAccepted", card: "DC-9", extra: #","tokenizedCardId":"TK-9""#))
        let bodies = try decision.bodies
        #expect(bodies[0].isNull("knownMessage"))
        #expect(bodies[0].isNull("previousState"))
        #expect(bodies[0].isNull("state"))
        #expect(bodies[0].bool("changed") == false)
        #expect(bodies[0].string("tokenizedCardId") == "TK-9")
        #expect(bodies[1].isNull("state"))
        #expect(bodies[1].string("tokenizedCardId") == "TK-9")
        #expect(decision.effects.isEmpty)
        #expect(wallet.state.card("DC-9") == nil)
    }

    @Test func informationalWithNothingNewWritesNothing() throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active, tokenizedCardId: "TK-1")
        let decision = try wallet.send(Self.payload("CBP.error.pinLocked", extra: #","tokenizedCardId":"TK-1""#))
        #expect(decision.effects.isEmpty)
        #expect(decision.outcome == .processed)
    }

    @Test func replenishKeysRefreshesPaymentKeysWithoutReplenishmentOutcome() throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active, keyType: .luk)
        let decision = try wallet.send(Self.payload("CBP.info.tokenReplenished"))
        #expect(decision.primaries.allSatisfy { $0.exchange == "wallet.events" })
        #expect(try decision.bodies.allSatisfy { $0.string("kind") == "cardEvent" })
        let card = try #require(wallet.state.card("DC-1"))
        #expect(
            card.paymentKeys
                == PaymentKeyInfo(numberOfPaymentsLeft: 10, expiresAt: testNow.timeIntervalSince1970 + 7 * 86_400))
        #expect(card.keyType == .luk)
        #expect(card.state == .active)
        #expect(try decision.bodies[0].bool("changed") == false)
    }

    @Test func senderAndKeysAreCaseInsensitive() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"{"SENDER":"cps","DigitalCardID":"DC-1","serverMessage":{"code":"CBP.info.tokenProvisioned"}}"#)
        #expect(decision.sender == "CPS")
        #expect(try decision.bodies[0].string("sender") == "CPS")
        #expect(wallet.state.card("DC-1")?.state == .active)
    }

    @Test func otherKeysAreExact() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"{"sender":"CPS","digitalCardId":"DC-1","ServerMessage":{"code":"CBP.info.tokenProvisioned"}}"#)
        #expect(try decision.bodies[0].string("event") == "unsupportedPushContent")
    }

    @Test func oneUpsertPerMessageWithTheFinalCard() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            #"""
            {"sender":"CPS","digitalCardId":"DC-1","tokenizedCardId":"TK-1","keyType":"LUK","serverMessages":[
              {"code":"CBP.info.tokenProvisioned"},{"code":"CBP.info.tokenReplenished"},{"code":"CBP.info.tokenSuspended"}]}
            """#)
        let keys = PaymentKeyInfo(numberOfPaymentsLeft: 10, expiresAt: testNow.timeIntervalSince1970 + 7 * 86_400)
        #expect(
            decision.effects == [
                .upsertCard(
                    CardRecord(
                        digitalCardId: "DC-1", state: .suspended, tokenizedCardId: "TK-1", keyType: .luk,
                        paymentKeys: keys))
            ])
    }
}

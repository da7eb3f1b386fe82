import Foundation
import Testing

@testable import WalletRouting

@Suite("Non-SDK notifications (CONTRACT.md §6)")
struct ActionTests {
    @Test func actionIsTriggered() throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"aps":{"alert":"Your card is ready"},"action":"OpenCard.Details"}"#)
        let body = try #require(try decision.bodies.first)
        #expect(decision.primaries.map(\.exchange) == ["wallet.actions"])
        #expect(decision.primaries.map(\.routingKey) == ["action.OpenCard.Details"])
        #expect(
            body.keys == ["kind", "messageId", "correlationId", "sender", "processedAt", "action", "silent", "message"])
        #expect(body.string("kind") == "actionTriggered")
        #expect(body.isNull("sender"))
        #expect(body.string("action") == "OpenCard.Details")
        #expect(body.bool("silent") == false)
        #expect(body.string("message") == "Your card is ready")
        #expect(decision.outcome == .processed)
        #expect(decision.disposition == .acknowledge)
        #expect(decision.effects.isEmpty)
        #expect(decision.sender == nil)
    }

    @Test(arguments: [
        (#"{"aps":{"content-available":1},"action":"a"}"#, true),
        (#"{"aps":{"content-available":1,"alert":null},"action":"a"}"#, true),
        (#"{"aps":{"content-available":1,"sound":"x"},"action":"a"}"#, true),
        (#"{"aps":{"content-available":1,"alert":"hi"},"action":"a"}"#, false),
        (#"{"aps":{"content-available":1,"alert":{"title":"t"}},"action":"a"}"#, false),
        (#"{"aps":{"content-available":1,"alert":""},"action":"a"}"#, false),
        (#"{"aps":{"content-available":"1"},"action":"a"}"#, false),
        (#"{"aps":{"content-available":1.0},"action":"a"}"#, false),
        (#"{"aps":{"content-available":true},"action":"a"}"#, false),
        (#"{"aps":{"content-available":0},"action":"a"}"#, false),
        (#"{"aps":{"Content-Available":1},"action":"a"}"#, false),
        (#"{"content-available":1,"action":"a"}"#, false),
        (#"{"aps":[],"action":"a"}"#, false),
        (#"{"action":"a"}"#, false),
    ])
    func silent(_ json: String, _ expected: Bool) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json)
        #expect(try decision.bodies[0].bool("silent") == expected)
    }

    @Test(arguments: [
        (#"{"aps":{"alert":"hi"},"message":"top","action":"a"}"#, #""hi""#),
        (#"{"aps":{"alert":{"title":"T","body":"B"}},"message":"top","action":"a"}"#, #"{"title":"T","body":"B"}"#),
        (#"{"aps":{"alert":null},"message":"top","action":"a"}"#, #""top""#),
        (#"{"aps":{"alert":5},"message":"top","action":"a"}"#, #""top""#),
        (#"{"aps":{},"message":{"k":[1,2]},"action":"a"}"#, #"{"k":[1,2]}"#),
        (#"{"message":"top","action":"a"}"#, #""top""#),
        (#"{"message":null,"action":"a"}"#, "null"),
        (#"{"action":"a"}"#, "null"),
        (#"{"Message":"top","action":"a"}"#, "null"),
    ])
    func message(_ json: String, _ expected: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json)
        #expect(try decision.bodies[0]["message"] == (try JSONValue(json: expected)))
    }

    @Test(arguments: [
        #"{"aps":{"alert":"hi"}}"#,
        #"{"action":null}"#,
        #"{"action":""}"#,
        #"{"action":42}"#,
        #"{"action":{"name":"x"}}"#,
        #"{"sender":"backend","action":["a"]}"#,
        #"{}"#,
    ])
    func withoutAnActionTheNotificationIsIgnored(_ json: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json, replyTo: "amq.rabbitmq.reply-to")
        #expect(decision.results.isEmpty)
        #expect(decision.effects.isEmpty)
        #expect(decision.disposition == .acknowledge)
        #expect(decision.outcome == .ignored)
    }

    @Test(arguments: [
        #"{"sender":"backend","action":"a"}"#,
        #"{"sender":"CPSX","action":"a"}"#,
        #"{"sender":"","action":"a"}"#,
        #"{"sender":5,"action":"a"}"#,
        #"{"sender":null,"action":"a"}"#,
        #"{"sender":"cpſ","action":"a"}"#,
    ])
    func anyOtherSenderIsNonSDK(_ json: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json)
        #expect(try decision.bodies[0].string("kind") == "actionTriggered")
    }

    @Test(arguments: [
        (#"{"sender":"backend","action":"a"}"#, "BACKEND"),
        (#"{"sender":"Café","action":"a"}"#, "CAFÉ"),
        (#"{"sender":"","action":"a"}"#, ""),
        (#"{"sender":5,"action":"a"}"#, nil),
        (#"{"action":"a"}"#, nil),
    ])
    func senderIsUpperCasedInTheEnvelope(_ json: String, _ expected: String?) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json)
        #expect(try decision.bodies[0]["sender"] == expected.map(JSONValue.string) ?? .null)
        #expect(decision.sender == expected)
    }

    @Test func actionKeyIsCaseInsensitiveAndItsValueKeptAsReceived() throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"Action":"Refresh.Wallet"}"#)
        #expect(try decision.bodies[0].string("action") == "Refresh.Wallet")
        #expect(decision.primaries[0].routingKey == "action.Refresh.Wallet")
    }

    @Test(arguments: [
        (String(repeating: "a", count: 200), true),
        (String(repeating: "é", count: 100), true),  // 200 bytes
        (String(repeating: "a", count: 201), false),
        (String(repeating: "é", count: 100) + "a", false),
        (String(repeating: "€", count: 67), false),  // 201 bytes, 67 characters
    ])
    func actionLengthIsLimitedInBytes(_ action: String, _ accepted: Bool) throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"action":"\#(action)"}"#)
        if accepted {
            #expect(decision.outcome == .processed)
            #expect(decision.primaries[0].routingKey == "action.\(action)")
        } else {
            let reason = try #require(decision.rejectionReason)
            #expect(reason.hasPrefix("action"))
            #expect(decision.outcome == .rejected)
            #expect(decision.disposition == .deadLetter(reason: reason))
        }
    }

    @Test func actionLimitIsConfigurable() throws {
        var settings = RoutingSettings()
        settings.maximumActionBytes = 3
        var wallet = Wallet(settings: settings)
        #expect(try wallet.send(#"{"action":"abc"}"#).outcome == .processed)
        #expect(try wallet.send(#"{"action":"abcd"}"#).outcome == .rejected)
    }
}

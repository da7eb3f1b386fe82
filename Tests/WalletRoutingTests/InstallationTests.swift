import Foundation
import Testing

@testable import WalletRouting

@Suite("Device installations (CONTRACT.md §7)")
struct InstallationTests {
    static let token = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

    static func body(
        id: String = #""inst-1""#, platform: String = #""apns""#, pushChannel: String = #""\#(token)""#,
        tags: String? = #"["user:42"]"#
    ) -> String {
        var json = #"{"installationId":\#(id),"platform":\#(platform),"pushChannel":\#(pushChannel)"#
        if let tags { json += #","tags":\#(tags)"# }
        return json + "}"
    }

    @Test func apnsInstallationIsRegisteredWithTheTokenUpperCased() throws {
        var wallet = Wallet()
        let decision = try wallet.send(Self.body(platform: #""APNs""#), type: "DeviceInstallation")
        let body = try #require(try decision.bodies.first)
        #expect(
            body.keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "installationId",
                "platform", "outcome",
            ])
        #expect(body.string("kind") == "installationOutcome")
        #expect(body.isNull("sender"))
        #expect(body.string("installationId") == "inst-1")
        #expect(body.string("platform") == "apns")
        #expect(body.string("outcome") == "registered")
        #expect(decision.primaries.map(\.exchange) == ["wallet.installations"])
        #expect(decision.primaries.map(\.routingKey) == ["installation.registered"])
        #expect(decision.outcome == .processed)
        #expect(decision.disposition == .acknowledge)
        #expect(decision.sender == nil)
        let installation = Installation(
            installationId: "inst-1", platform: "apns", pushChannel: Self.token.uppercased(), tags: ["user:42"])
        #expect(decision.effects == [.upsertInstallation(installation)])
        #expect(wallet.state.installations["inst-1"] == installation)
    }

    @Test func fcmTokenIsStoredAsReceived() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            Self.body(platform: #""FCM""#, pushChannel: #""fcm:Token_x-1""#, tags: nil),
            type: "DeviceInstallation")
        #expect(
            decision.effects == [
                .upsertInstallation(
                    Installation(
                        installationId: "inst-1", platform: "fcm", pushChannel: "fcm:Token_x-1", tags: []))
            ])
        #expect(try decision.bodies[0].string("platform") == "fcm")
    }

    @Test func upsertReplacesAndDeleteRemoves() throws {
        var wallet = Wallet()
        try wallet.send(Self.body(), type: "DeviceInstallation")
        try wallet.send(Self.body(platform: #""fcm""#, pushChannel: #""t""#, tags: "null"), type: "DeviceInstallation")
        #expect(wallet.state.installations["inst-1"]?.platform == "fcm")
        #expect(wallet.state.installations["inst-1"]?.tags == [])

        let decision = try wallet.send(#"{"installationId":"inst-1"}"#, type: "DeviceInstallationDeleted")
        let body = try #require(try decision.bodies.first)
        #expect(
            body.keys == ["kind", "messageId", "correlationId", "sender", "processedAt", "installationId", "outcome"])
        #expect(body.string("outcome") == "deleted")
        #expect(decision.primaries.map(\.routingKey) == ["installation.deleted"])
        #expect(decision.effects == [.deleteInstallation(installationId: "inst-1")])
        #expect(wallet.state.installations.isEmpty)

        // Deleting what does not exist is still `deleted`.
        let again = try wallet.send(
            #"{"installationId":"inst-1","platform":"apns"}"#, type: "DeviceInstallationDeleted")
        #expect(try again.bodies[0].string("outcome") == "deleted")
        #expect(again.outcome == .processed)
    }

    @Test func theTypeDecidesWhateverTheBodySays() throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active)
        let decision = try wallet.send(
            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1","installationId":"i","platform":"fcm","pushChannel":"t"}"#,
            type: "DeviceInstallation")
        #expect(try decision.bodies.map { $0.string("kind") } == ["installationOutcome"])
        #expect(try decision.bodies[0].isNull("sender"))
        #expect(decision.sender == nil)
    }

    @Test(arguments: ["deviceinstallation", "DeviceInstallation ", "Deviceinstallation", "DeviceInstallationdeleted"])
    func typeIsMatchedExactly(_ type: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(Self.body(), type: type)
        #expect(decision.outcome == .ignored)  // routed as a push payload without an action
    }

    /// Each invalid field, in the order the contract checks them.
    @Test(arguments: [
        (body(id: "null"), "installationId"),
        (#"{"platform":"apns","pushChannel":"AB"}"#, "installationId"),
        (body(id: #""""#), "installationId"),
        (body(id: "42"), "installationId"),
        (body(id: #""\#(String(repeating: "x", count: 257))""#), "installationId"),
        (body(id: #""\#(String(repeating: "é", count: 257))""#), "installationId"),
        (body(id: #""""#, platform: "null", pushChannel: "null", tags: "5"), "installationId"),
        (body(platform: "null"), "platform"),
        (#"{"installationId":"inst-1","pushChannel":"AB"}"#, "platform"),
        (body(platform: #""gcm""#), "platform"),
        (body(platform: #""wns""#), "platform"),
        (body(platform: #""apns ""#), "platform"),
        (body(platform: "1"), "platform"),
        (body(platform: #""x""#, pushChannel: "null", tags: "5"), "platform"),
        (body(pushChannel: "null"), "pushChannel"),
        (#"{"installationId":"inst-1","platform":"apns"}"#, "pushChannel"),
        (body(pushChannel: #""""#), "pushChannel"),
        (body(platform: #""fcm""#, pushChannel: #""""#), "pushChannel"),
        (body(pushChannel: "123"), "pushChannel"),
        (body(pushChannel: #""ABC""#), "pushChannel"),
        (body(pushChannel: #""0g""#), "pushChannel"),
        (body(pushChannel: #""AB CD""#), "pushChannel"),
        (body(pushChannel: #""<abcd>""#), "pushChannel"),
        (body(pushChannel: #""ABC""#, tags: "5"), "pushChannel"),
        (body(tags: #""user:42""#), "tags"),
        (body(tags: #"{"a":"b"}"#), "tags"),
        (body(tags: #"[""]"#), "tags"),
        (body(tags: #"[42]"#), "tags"),
        (body(tags: #"[null]"#), "tags"),
        (body(tags: #"["user 42"]"#), "tags"),
        (body(tags: #"["user/42"]"#), "tags"),
        (body(tags: #"["ünïcode"]"#), "tags"),
        (body(tags: #"["\#(String(repeating: "t", count: 121))"]"#), "tags"),
        (body(tags: "[" + (1...61).map { #""t\#($0)""# }.joined(separator: ",") + "]"), "tags"),
    ])
    func invalidFieldIsRejectedButAcknowledged(_ json: String, _ field: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json, type: "DeviceInstallation")
        let body = try #require(try decision.bodies.first)
        #expect(body.string("kind") == "installationOutcome")
        #expect(body.string("outcome") == "rejected")
        let reason = try #require(body.string("reason"))
        #expect(reason.hasPrefix(field))
        #expect(body.keys.last == "reason")
        #expect(decision.primaries.map(\.routingKey) == ["installation.rejected"])
        #expect(decision.disposition == .acknowledge)
        #expect(decision.outcome == .domainError)
        #expect(decision.effects.isEmpty)
        // The push token is never echoed, whatever went wrong.
        #expect(!decision.primaries[0].text.lowercased().contains("a1b2c3d4"))
        #expect(!decision.primaries[0].text.contains("ABC\""))
    }

    @Test(arguments: [
        (body(), "inst-1", "apns"),
        (body(platform: #""fcm""#, tags: "7"), "inst-1", "fcm"),
        (body(pushChannel: "null"), "inst-1", "apns"),
        (body(platform: #""gcm""#), "inst-1", nil),
        (body(id: "42"), nil, nil),
        (body(id: #""""#), "", nil),
    ])
    func outcomeEchoesIdAsReceivedAndPlatformWhenValid(_ json: String, _ id: String?, _ platform: String?) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json, type: "DeviceInstallation")
        let body = try #require(try decision.bodies.first)
        #expect(body["installationId"] == id.map(JSONValue.string) ?? .null)
        #expect(body["platform"] == platform.map(JSONValue.string))
    }

    @Test(arguments: [
        body(id: #""\#(String(repeating: "x", count: 256))""#),
        body(id: #""\#(String(repeating: "😀", count: 256))""#),  // 256 scalars, 1024 bytes
        body(tags: #"["\#(String(repeating: "t", count: 120))"]"#),
        body(tags: #"["AZaz09_@#.:-"]"#),
        body(tags: "[" + (1...60).map { #""t\#($0)""# }.joined(separator: ",") + "]"),
        body(tags: "[]"),
        body(tags: nil),
        body(pushChannel: #""abcdef0123456789ABCDEF""#),
    ])
    func limitsAreInclusive(_ json: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json, type: "DeviceInstallation")
        #expect(try decision.bodies[0].string("outcome") == "registered")
    }

    @Test(arguments: [#"{}"#, #"{"installationId":""}"#, #"{"installationId":null}"#, #"{"installationId":1}"#])
    func deletionNeedsAnInstallationId(_ json: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(json, type: "DeviceInstallationDeleted")
        #expect(try decision.bodies[0].string("outcome") == "rejected")
        #expect(try decision.bodies[0].string("reason")?.hasPrefix("installationId") == true)
        #expect(decision.effects.isEmpty)
    }

    @Test(arguments: ["DeviceInstallation", "DeviceInstallationDeleted"])
    func bodyThatIsNotAnObjectIsBadInput(_ type: String) throws {
        var wallet = Wallet()
        for json in [#"["inst-1"]"#, #""inst-1""#, "null", "{"] {
            let decision = try wallet.send(json, type: type)
            let reason = try #require(decision.rejectionReason)
            #expect(decision.disposition == .deadLetter(reason: reason))
            #expect(decision.outcome == .rejected)
        }
    }

    @Test func tokenNeverAppearsInResults() throws {
        var wallet = Wallet()
        for json in [Self.body(), Self.body(tags: "5"), Self.body(platform: #""fcm""#, tags: "[1]")] {
            let decision = try wallet.send(json, type: "DeviceInstallation", replyTo: "reply")
            for result in decision.results {
                #expect(!result.text.uppercased().contains(Self.token.uppercased()))
            }
        }
    }
}

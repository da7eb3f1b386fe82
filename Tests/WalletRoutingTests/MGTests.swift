import Foundation
import Testing

@testable import WalletRouting

@Suite("MG: payment key replenishment (CONTRACT.md §5)")
struct MGTests {
    static let notification = #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#

    @Test(arguments: [KeyType.suk, .luk])
    func activeCardIsReplenished(_ keyType: KeyType) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active, tokenizedCardId: "TK-1", keyType: keyType)
        let decision = try wallet.send(Self.notification)
        let body = try #require(try decision.bodies.first)
        #expect(decision.primaries.count == 1)
        #expect(decision.primaries[0].exchange == "wallet.replenishment")
        #expect(decision.primaries[0].routingKey == "replenishment.replenished")
        #expect(decision.primaries[0].properties.type == "replenishmentOutcome")
        #expect(
            body.keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "digitalCardId",
                "isForced", "outcome", "keyInfo",
            ])
        #expect(body.string("kind") == "replenishmentOutcome")
        #expect(body.string("sender") == "MG")
        #expect(body.string("digitalCardId") == "DC-1")
        #expect(body.bool("isForced") == true)
        #expect(body.string("outcome") == "replenished")
        #expect(body["error"] == nil)
        #expect(
            decision.primaries[0].text.contains(
                #""keyInfo":{"numberOfPaymentsLeft":10,"expiryDate":"2026-11-27T10:15:00.000Z","needsReplenishment":false,"keyType":"\#(keyType.rawValue)"}"#
            ))
        #expect(decision.outcome == .processed)
        #expect(decision.disposition == .acknowledge)
        let keys = PaymentKeyInfo(numberOfPaymentsLeft: 10, expiresAt: 1_795_774_500)
        #expect(
            decision.effects == [
                .upsertCard(
                    CardRecord(
                        digitalCardId: "DC-1", state: .active, tokenizedCardId: "TK-1", keyType: keyType,
                        paymentKeys: keys))
            ])
    }

    @Test(arguments: [
        (CardState?.some(.suspended), "replenishmentNotAllowed"),
        (nil, "unknownDigitalCardID"),
        (.deleted, "unknownDigitalCardID"),
    ])
    func otherCardsFail(_ state: CardState?, _ kind: String) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", state)
        let decision = try wallet.send(Self.notification)
        let body = try #require(try decision.bodies.first)
        #expect(
            body.keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "digitalCardId",
                "isForced", "outcome", "error",
            ])
        #expect(body.bool("isForced") == true)
        #expect(body.string("outcome") == "failed")
        #expect(body.object("error")?.string("kind") == kind)
        #expect(body.object("error")?.string("message")?.isEmpty == false)
        #expect(body["keyInfo"] == nil)
        #expect(decision.primaries.map(\.routingKey) == ["replenishment.failed"])
        #expect(decision.outcome == .domainError)
        #expect(decision.disposition == .acknowledge)
        #expect(decision.effects.isEmpty)
    }

    @Test(arguments: [
        (#"{"sender":"MG","digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"MG","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification "}"#, "action"),
        (#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification"}"#, "digitalCardId"),
        (#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":""}"#, "digitalCardId"),
        (#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":["DC-1"]}"#, "digitalCardId"),
    ])
    func badInputIsRejected(_ json: String, _ field: String) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active)
        let decision = try wallet.send(json)
        let reason = try #require(decision.rejectionReason)
        #expect(reason.hasPrefix(field))
        #expect(decision.disposition == .deadLetter(reason: reason))
        #expect(decision.outcome == .rejected)
        #expect(decision.sender == "MG")
        #expect(decision.effects.isEmpty)
    }

    @Test func actionIsCaseInsensitive() throws {
        var wallet = Wallet()
        wallet.seed("DC-1", .active)
        let decision = try wallet.send(
            #"{"sender":"mg","action":"mg:replenishmentneedednotification","digitalCardID":"DC-1"}"#)
        #expect(decision.outcome == .processed)
    }

    @Test func batchSizeAndValidityAreConfigurable() throws {
        var settings = RoutingSettings()
        settings.paymentKeyBatchSize = 3
        settings.paymentKeyValiditySeconds = 3600.5
        var wallet = Wallet(settings: settings)
        wallet.seed("DC-1", .active)
        let decision = try wallet.send(Self.notification)
        #expect(
            decision.primaries[0].text.contains(
                #""keyInfo":{"numberOfPaymentsLeft":3,"expiryDate":"2026-11-20T11:15:00.500Z""#))
    }

    @Test func installedLUKCardReplenishesAsLUK() throws {
        var wallet = Wallet()
        try wallet.send(
            #"{"sender":"CPS","digitalCardId":"DC-1","keyType":"luk","serverMessage":{"code":"CBP.info.tokenProvisioned"}}"#
        )
        let decision = try wallet.send(Self.notification)
        #expect(try decision.bodies[0].object("keyInfo")?.string("keyType") == "LUK")
    }
}

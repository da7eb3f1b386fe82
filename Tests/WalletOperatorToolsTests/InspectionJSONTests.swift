import Foundation
import Testing
import WalletRouting
import WalletStore

@testable import WalletOperatorTools

/// What `wallet-worker inspect` prints, decoded from the store's types.
@Suite struct InspectionJSONTests {
    private func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func aCardShowsItsKeysExpiryAndHistoryAsStored() throws {
        let record = TransactionRecord(
            id: "T-1", date: "2026-11-20T10:00:00+01:00", instant: 1_795_597_200, status: "approved",
            type: "purchase", currencyCode: "EUR", amount: JSONNumber(validatedLiteral: "12.50"), merchantName: "Café")
        let card = InspectedCard(
            card: CardRecord(
                digitalCardId: "DC-1", state: .suspended, tokenizedCardId: nil, keyType: .luk,
                paymentKeys: PaymentKeyInfo(numberOfPaymentsLeft: 3, expiresAt: 1_800_000_000)),
            transactions: [record], transactionCount: 7)
        let shown = try object(InspectionJSON.card(card, now: Date(timeIntervalSince1970: 1_800_000_001)))
        #expect(shown["state"] as? String == "suspended" && shown["keyType"] as? String == "LUK")
        #expect(shown["tokenizedCardId"] is NSNull)
        let keys = try #require(shown["paymentKeys"] as? [String: Any])
        #expect(keys["expiresAt"] as? String == "2027-01-15T08:00:00Z" && keys["expired"] as? Bool == true)
        #expect(shown["transactionCount"] as? Int == 7)
        let transactions = try #require(shown["transactions"] as? [[String: Any]])
        let merchant = transactions.first?["merchantName"] as? String
        #expect(merchant == "Café")
        // The amount literal as received, not a re-encoded double.
        #expect(String(decoding: InspectionJSON.card(card, now: Date()), as: UTF8.self).contains(#""amount":12.50"#))
    }

    @Test func anInstallationsPushChannelIsMaskedUnlessAsked() throws {
        let installation = Installation(
            installationId: "inst-1", platform: "apns", pushChannel: "A1B2C3D4E5F6A7B8", tags: ["user:1"])
        let masked = try object(InspectionJSON.installation(installation, showPushChannel: false))
        let shownMasked = try #require(masked["pushChannel"] as? String)
        #expect(
            !shownMasked.contains("A1B2C3D4") && shownMasked.contains("A7B8") && shownMasked.contains("16 characters"))
        let shown = try object(InspectionJSON.installation(installation, showPushChannel: true))
        #expect(shown["pushChannel"] as? String == "A1B2C3D4E5F6A7B8")
        #expect(shown["tags"] as? [String] == ["user:1"])
    }
}

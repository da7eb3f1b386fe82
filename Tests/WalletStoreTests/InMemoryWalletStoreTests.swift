import Foundation
import Testing
import WalletRouting
import WalletStore

@Suite struct InMemoryWalletStoreTests {
    @Test func replaysARecordedMessageID() async throws {
        let store = InMemoryWalletStore()
        let router = NotificationRouter()
        let install = InboundMessage(
            body: Array(
                #"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"CBP.info.tokenProvisioned"}}"#.utf8),
            properties: InboundProperties(messageID: "m1"))
        let first = try await store.process([install], router: router, now: Date(timeIntervalSince1970: 1))
        let second = try await store.process([install], router: router, now: Date(timeIntervalSince1970: 2))
        #expect(first[0].isReplay == false)
        #expect(second[0].isReplay == true)
        #expect(second[0].decision.results == first[0].decision.results)
        #expect(second[0].decision.effects.isEmpty)
    }
}

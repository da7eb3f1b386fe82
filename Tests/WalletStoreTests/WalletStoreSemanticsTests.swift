import Foundation
import Testing
import WalletRouting

@testable import WalletStore

/// The same semantics on every store (CONTRACT.md §10): effects, deduplication, expiry.
@Suite struct WalletStoreSemanticsTests {
    // MARK: - Effects

    @Test(arguments: StoreKind.allCases)
    func cardUpsertReadsBackEveryField(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let now: TimeInterval = 1_790_000_000
            try await store.process(
                [Messages.install("DC-1", id: "m1", keyType: "luk"), Messages.mg("DC-1", id: "m2")], at: now)
            let card = try #require(try await store.card("DC-1"))
            #expect(
                card
                    == CardRecord(
                        digitalCardId: "DC-1", state: .active, tokenizedCardId: "TK-1", keyType: .luk,
                        paymentKeys: PaymentKeyInfo(numberOfPaymentsLeft: 10, expiresAt: now + 7 * 86_400)))

            try await store.process([
                Messages.cps("DC-1", code: "CBP.info.tokenSuspended", id: "m3", tokenizedCardId: "TK-2")
            ])
            let suspended = try #require(try await store.card("DC-1"))
            #expect(suspended.state == .suspended)
            #expect(suspended.tokenizedCardId == "TK-2")
            #expect(suspended.keyType == .luk)
            #expect(suspended.paymentKeys == card.paymentKeys)
            #expect(try await store.card("DC-unknown") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aDryRunDecidesAsProcessWouldAndKeepsNothing(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.process([Messages.install("DC-1", id: "i1")])
            // A batch of two: the second message must see the first one's effect within the dry run.
            let batch = [
                Messages.suspend("DC-1", id: "s1"),
                Messages.tns("DC-1", recordId: "T-1", date: "2026-11-20T10:00:00Z", id: "t1"),
            ]
            let now = Date(timeIntervalSince1970: 1_790_000_100)
            let dry = try await store.store.dryRun(batch, router: NotificationRouter(), now: now)
            #expect(try await store.card("DC-1")?.state == .active)
            #expect(try await store.transactions("DC-1").isEmpty)

            let real = try await store.store.process(batch, router: NotificationRouter(), now: now)
            #expect(dry == real, "the same decisions, and no replay: the dry run recorded no message_id")
            #expect(real.map(\.isReplay) == [false, false])
            #expect(try await store.card("DC-1")?.state == .suspended)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func transactionsAreNewestFirstWithTheTieRuleFilteredAndLimited(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.process([
                Messages.install("DC-1", id: "i1"),
                Messages.tns("DC-1", recordId: "T-1", date: "2026-11-20T10:00:00Z", id: "t1"),
                Messages.tns("DC-1", recordId: "T-2", date: "2026-11-20T10:05:00Z", id: "t2"),
            ])
            // Same instant as T-1 written with another zone: stored later, so it comes first among the two.
            try await store.process([
                Messages.tns("DC-1", recordId: "T-3", date: "2026-11-20T11:00:00+01:00", id: "t3"),
                Messages.tns("DC-1", recordId: "T-4", date: "2026-11-20T10:10:00Z", auxiliary: true, id: "t4"),
                // A second record with T-1's id (a new message id): the first is kept.
                Messages.tns("DC-1", recordId: "T-1", date: "2026-11-21T00:00:00Z", amount: "99", id: "t5"),
                Messages.install("DC-2", id: "i2"),
                Messages.tns("DC-2", recordId: "T-1", date: "2026-11-19T00:00:00Z", id: "t6"),
            ])

            #expect(try await store.transactions("DC-1").map(\.id) == ["T-4", "T-2", "T-3", "T-1"])
            #expect(try await store.transactions("DC-1", auxiliary: false).map(\.id) == ["T-2", "T-3", "T-1"])
            #expect(try await store.transactions("DC-1", auxiliary: true).map(\.id) == ["T-4"])
            #expect(try await store.transactions("DC-1", limit: 2).map(\.id) == ["T-4", "T-2"])
            #expect(try await store.transactions("DC-1", auxiliary: false, limit: 1).map(\.id) == ["T-2"])
            #expect(try await store.transactions("DC-1", limit: 0).isEmpty)
            #expect(try await store.transactions("DC-2").map(\.id) == ["T-1"])
            #expect(try await store.transactions("DC-none").isEmpty)

            let first = try #require(try await store.transactions("DC-1").last)
            let instant = try #require(ISO8601DateFormatter().date(from: "2026-11-20T10:00:00Z"))
            #expect(
                first
                    == TransactionRecord(
                        id: "T-1", date: "2026-11-20T10:00:00Z", instant: instant.timeIntervalSince1970,
                        status: "approved", type: "purchase", currencyCode: "EUR",
                        amount: JSONNumber(validatedLiteral: "12.50"), displayAmount: "12.50", merchantName: "Cafe",
                        merchantType: "5814", merchantPostalCode: "75001", terminalID: "TRM1", merchantID: "M1",
                        isAuxiliaryTransaction: false))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func installationsAreUpsertedAndDeleted(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.process([Messages.registerInstallation("inst-1", tags: ["user:42", "lang:fr"], id: "d1")])
            #expect(
                try await store.installation("inst-1")
                    == Installation(
                        installationId: "inst-1", platform: "apns", pushChannel: "A1B2C3D4",
                        tags: ["user:42", "lang:fr"]))

            try await store.process([Messages.registerInstallation("inst-1", tags: [], id: "d2")])
            #expect(try await store.installation("inst-1")?.tags == [])

            try await store.process([Messages.deleteInstallation("inst-1", id: "d3")])
            #expect(try await store.installation("inst-1") == nil)
        }
    }

    // MARK: - Deduplication

    @Test(arguments: StoreKind.allCases)
    func aRecordedMessageIDReplaysItsResultsAndAppliesNothing(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let suspend = Messages.cps(
                "DC-1", code: "CBP.info.tokenSuspended", id: "m-suspend", replyTo: "amq.rabbitmq.reply-to")
            let first = try await store.process(
                [
                    Messages.install("DC-1", id: "m-install"), suspend,
                    Messages.tns("DC-1", recordId: "T-1", id: "m-tns"),
                ], at: 1_790_000_000)
            try await store.process([Messages.resume("DC-1", id: "m-resume")], at: 1_790_000_100)

            // Redelivered later, with another body even: the recorded results come back verbatim.
            var redelivered = Messages.tns("DC-1", recordId: "T-2", id: "m-tns")
            redelivered.properties.traceparent = nil
            let replay = try await store.process([suspend, redelivered], at: 1_790_000_200)

            #expect(replay.map(\.isReplay) == [true, true])
            #expect(replay[0].decision == Self.recorded(first[1].decision))
            #expect(replay[1].decision == Self.recorded(first[2].decision))
            #expect(replay[0].decision.results.count == 4)  // the serverMessage, completed, and their reply_to copies
            // Nothing was applied again: the card stays resumed, T-2 was not stored.
            #expect(try await store.card("DC-1")?.state == .active)
            #expect(try await store.transactions("DC-1").map(\.id) == ["T-1"])
        }
    }

    /// Found in review: a replay republished the copies to the first delivery's `reply_to`; when that requester
    /// had gone the broker returned them, and the delivery went round the retry queue to the dead letters.
    @Test(arguments: StoreKind.allCases)
    func aReplaySendsTheReplyCopiesToThisDeliverysReplyTo(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let first = try await store.process([
                Messages.install("DC-1", id: "m-install"),
                Messages.cps("DC-1", code: "CBP.info.tokenSuspended", id: "m-suspend", replyTo: "requester-a"),
            ])
            let primaries = first[1].decision.results.filter { !$0.exchange.isEmpty }
            #expect(first[1].decision.results.map(\.routingKey).filter { $0 == "requester-a" }.count == primaries.count)

            let elsewhere = try await store.process([
                Messages.cps("DC-1", code: "CBP.info.tokenSuspended", id: "m-suspend", replyTo: "requester-b")
            ])
            #expect(elsewhere[0].isReplay)
            #expect(elsewhere[0].decision.results.map(\.exchange) == primaries.flatMap { [$0.exchange, ""] })
            #expect(
                elsewhere[0].decision.results.filter { $0.exchange.isEmpty }.map(\.routingKey)
                    == Array(repeating: "requester-b", count: primaries.count))
            #expect(elsewhere[0].decision.results.filter { !$0.exchange.isEmpty } == primaries)

            let nobodyWaiting = try await store.process([
                Messages.cps("DC-1", code: "CBP.info.tokenSuspended", id: "m-suspend")
            ])
            #expect(nobodyWaiting[0].decision.results == primaries)
            #expect(try await store.card("DC-1")?.state == .suspended)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theSameMessageIDTwiceInOneBatchIsAReplay(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let decisions = try await store.process([
                Messages.install("DC-1", id: "m1"),
                Messages.suspend("DC-1", id: "m2"),
                Messages.resume("DC-1", id: "m3"),
                Messages.suspend("DC-1", id: "m2"),
            ])
            #expect(decisions.map(\.isReplay) == [false, false, false, true])
            #expect(decisions[3].decision == Self.recorded(decisions[1].decision))
            #expect(try await store.card("DC-1")?.state == .active)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func messagesWithoutAnIDAreNeverRecorded(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let decisions = try await store.process([
                Messages.install("DC-1", id: nil),
                Messages.tns("DC-1", recordId: "T-1", id: nil),
                Messages.tns("DC-1", recordId: "T-2", id: ""),
                Messages.tns("DC-1", recordId: "T-1", id: nil),
                Messages.tns("DC-1", recordId: "T-2", id: ""),
            ])
            #expect(decisions.map(\.isReplay) == [false, false, false, false, false])
            #expect(try await store.transactions("DC-1").map(\.id) == ["T-2", "T-1"])
            #expect(try await store.store.expireProcessedMessages(recordedBefore: .distantFuture) == 0)
        }
    }

    /// Issue 36, item 4: a message dead-lettered after its effects were committed is noted beside its record (for
    /// `inspect message`) until a replay delivers its results, or its record expires; a message never recorded
    /// gets no note.
    @Test(arguments: StoreKind.allCases)
    func aMessageDeadLetteredAfterItsCommitIsNotedUntilItsResultsAreDelivered(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.process([Messages.install("DC-1", id: "m-1"), Messages.notJSON(id: "m-bad")])
            func note(_ id: String, at seconds: TimeInterval, _ error: String) -> UndeliveredResults {
                UndeliveredResults(
                    messageID: id, deadLetteredAt: Date(timeIntervalSince1970: seconds), reason: "retries_exhausted",
                    error: error)
            }
            let first = note("m-1", at: 1_790_000_100, "dead-lettered after 5 attempts: returned 312 NO_ROUTE")
            try await store.store.noteResultDelivery(
                ResultDeliveryNote(undelivered: [
                    first, note("m-bad", at: 1_790_000_100, "a rejection"), note("m-never", at: 1_790_000_100, "?"),
                ]))
            #expect(try await store.undelivered("m-1") == first)
            #expect(try await store.undelivered("m-bad") == nil, "a rejection is never recorded: nothing to replay")
            #expect(try await store.undelivered("m-never") == nil)

            // Dead-lettered again (replayed while the route was still missing): the later dead letter is kept.
            let second = note("m-1", at: 1_790_000_200, "dead-lettered after 5 attempts: nacked")
            try await store.store.noteResultDelivery(ResultDeliveryNote(undelivered: [second]))
            #expect(try await store.undelivered("m-1") == second)

            // A replay delivered its results (and one that had no note).
            try await store.store.noteResultDelivery(ResultDeliveryNote(delivered: ["m-1", "m-other"]))
            #expect(try await store.undelivered("m-1") == nil)

            // One batch noting a message twice keeps the later note; noted both ways, it is delivered.
            try await store.process([Messages.install("DC-2", id: "m-2")])
            try await store.store.noteResultDelivery(ResultDeliveryNote(undelivered: [first, second]))
            #expect(try await store.undelivered("m-1") == second)
            try await store.store.noteResultDelivery(
                ResultDeliveryNote(undelivered: [note("m-2", at: 1_790_000_300, "x"), first], delivered: ["m-1"]))
            #expect(try await store.undelivered("m-1") == nil)
            #expect(try await store.undelivered("m-2")?.error == "x")

            // Expired with its record.
            try await store.store.noteResultDelivery(ResultDeliveryNote(undelivered: [first]))
            #expect(try await store.store.expireProcessedMessages(recordedBefore: .distantFuture) == 2)
            #expect(try await store.undelivered("m-1") == nil)
            #expect(try await store.undelivered("m-2") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aRejectedMessageIsNotRecordedAndAnIgnoredOneIs(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let first = try await store.process([Messages.notJSON(id: "m-bad"), Messages.ignored(id: "m-ignored")])
            #expect(first[0].decision.outcome == .rejected)
            #expect(first[1].decision.outcome == .ignored)
            #expect(first[1].decision.results.isEmpty)

            // The fixed message comes back from the dead-letter queue with the same id: routed afresh.
            let second = try await store.process([
                Messages.install("DC-1", id: "m-bad"), Messages.ignored(id: "m-ignored"),
            ])
            #expect(second.map(\.isReplay) == [false, true])
            #expect(second[0].decision.outcome == .processed)
            #expect(second[1].decision == Self.recorded(first[1].decision))
            #expect(try await store.card("DC-1")?.state == .active)
        }
    }

    // MARK: - Expiry

    @Test(arguments: StoreKind.allCases)
    func expiryForgetsIDsRecordedBeforeTheCutoff(kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.process([Messages.install("DC-1", id: "m1"), Messages.ignored(id: "m2")], at: 1_000)
            try await store.process([Messages.suspend("DC-1", id: "m3")], at: 2_000)
            try await store.process([Messages.ignored(id: "m4")], at: 3_000)

            #expect(
                try await store.store.expireProcessedMessages(recordedBefore: Date(timeIntervalSince1970: 2_000)) == 2)
            #expect(
                try await store.store.expireProcessedMessages(recordedBefore: Date(timeIntervalSince1970: 2_000)) == 0)

            let after = try await store.process(
                [Messages.install("DC-1", id: "m1"), Messages.suspend("DC-1", id: "m3"), Messages.ignored(id: "m4")],
                at: 4_000)
            #expect(after.map(\.isReplay) == [false, true, true])
            // m1 was routed afresh: the card is suspended, so installing it again is an error (and no change).
            #expect(after[0].decision.results.first?.routingKey == "card.errorEncountered")
            #expect(
                try await store.store.expireProcessedMessages(recordedBefore: Date(timeIntervalSince1970: 10_000)) == 3)
        }
    }

    /// A replay's decision: the recorded results and labels, no effects.
    static func recorded(_ decision: Decision) -> Decision {
        Decision(
            effects: [], results: decision.results, disposition: .acknowledge, outcome: decision.outcome,
            sender: decision.sender, digitalCardId: decision.digitalCardId)
    }
}

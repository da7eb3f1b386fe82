import Foundation
import PropertyBased
import Testing
import WalletRouting

/// `NotificationRouter.foreseeReads` names every read routing makes: over the golden corpus (every step, from the
/// state the steps before it left) and over mutated and random payloads against cards in each state. A read it
/// missed would cost the PostgreSQL store one more round trip per batch, not a wrong result; these tests keep
/// the foresight from drifting away from the rules.
@Suite("Read foresight")
struct ReadForesightTests {
    @Test("every read of the golden corpus is foreseen")
    func goldenCorpusReadsAreForeseen() throws {
        let router = NotificationRouter()
        var readsChecked = 0
        for golden in GoldenCorpus.cases where golden.loadError == nil {
            var state = InMemoryWalletState()
            for (index, step) in golden.steps.enumerated() {
                let message = try step.message()
                let recorder = ReadRecorder(state)
                let decision = try router.route(message, state: recorder, now: GoldenCorpus.now)
                // Routing the body the foresight parsed decides the same.
                var foreseen = ForeseenReads()
                let body = router.foreseeReads(of: message, into: &foreseen)
                let shared = try router.route(message, body: body, state: state, now: GoldenCorpus.now)
                #expect(shared == decision, "\(golden.name), step \(index): the foreseen body routes differently")
                state.apply(decision.effects)
                readsChecked += recorder.reads.count
                let unforeseen = recorder.unforeseen(by: router, message: message)
                #expect(unforeseen.isEmpty, "\(golden.name), step \(index): not foreseen \(unforeseen)")
            }
        }
        #expect(readsChecked > 100, "the corpus made only \(readsChecked) reads: is it loaded?")
    }

    @Test("every read of a mutated payload is foreseen")
    func mutatedPayloadReadsAreForeseen() async {
        await propertyCheck(count: 1_000, input: MutationGen.mutatedPayload) { mutated in
            Self.expectForeseen(body: mutated.bytes, type: mutated.type)
        }
    }

    @Test("every read of a random object with SDK keys is foreseen")
    func randomObjectReadsAreForeseen() async {
        await propertyCheck(count: 1_000, input: JSONGen.sdkObject) { object in
            Self.expectForeseen(body: object.encoded(), type: nil)
        }
    }

    static let record =
        #"{"id":"T-9","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","#
        + #""amount":12.50,"isAuxiliaryTransaction":true}"#

    @Test("a TNS foresees its card, its record and the history of its kind, as long as the settings say")
    func transactionNotification() {
        var settings = RoutingSettings()
        settings.transactionHistoryLimit = 3
        let reads = Self.foreseen(
            #"{"sender":"tns","action":"tns:paymenttransactionnotification","digitalCardID":"DC-1","#
                + #""transactionRecordType":"AUXILIARY","transaction":\#(Self.record)}"#, settings: settings)
        #expect(reads.cards == ["DC-1"])
        #expect(reads.records == [ForeseenReads.Record(digitalCardId: "DC-1", recordId: "T-9")])
        #expect(reads.histories == [ForeseenReads.History(digitalCardId: "DC-1", auxiliary: true): 3])
    }

    /// What the route refuses before it reads the state foresees nothing, so bad input naming a real card neither
    /// locks it nor reads its history.
    @Test(
        "messages refused before any read foresee nothing",
        arguments: [
            #"{"sender":"TNS","digitalCardId":"DC-1","transaction":\#(record)}"#,
            #"{"sender":"TNS","action":"TNS:Other","digitalCardId":"DC-1"}"#,
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1","#
                + #""transactionRecordType":"both"}"#,
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1","#
                + #""transaction":{"id":"T-9"}}"#,
            #"{"sender":"MG","digitalCardId":"DC-1"}"#,
            #"{"sender":"CPS","digitalCardId":"DC-1","serverMessages":[]}"#,
        ])
    func refusedBeforeAnyRead(json: String) {
        #expect(Self.foreseen(json) == ForeseenReads())
    }

    @Test("a message id the route refuses foresees nothing")
    func refusedMessageID() {
        let json = #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#
        let long = String(repeating: "m", count: RoutingSettings.maximumMessageIDBytes + 1)
        var reads = ForeseenReads()
        NotificationRouter().foreseeReads(
            of: InboundMessage(body: Array(json.utf8), properties: InboundProperties(messageID: long)), into: &reads)
        #expect(reads == ForeseenReads())
        #expect(Self.foreseen(json).cards == ["DC-1"])
    }

    @Test("CPS and MG foresee their card only")
    func cardOnly() {
        let cps = Self.foreseen(#"{"sender":"CPS","digitalCardId":"DC-2","serverMessage":{"code":"x"}}"#)
        #expect(Self.foreseen(#"{"sender":"CPS","digitalCardId":"DC-2"}"#) == ForeseenReads())
        let mg = Self.foreseen(#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-3"}"#)
        #expect(cps.cards == ["DC-2"] && cps.records.isEmpty && cps.histories.isEmpty)
        #expect(mg.cards == ["DC-3"] && mg.records.isEmpty && mg.histories.isEmpty)
    }

    @Test("installations, action notifications, bad JSON and bodies over the limit foresee nothing")
    func nothing() {
        let card = #"{"sender":"MG","digitalCardId":"DC-1"}"#
        #expect(Self.foreseen(card, type: NotificationRouter.deviceInstallationType) == ForeseenReads())
        #expect(Self.foreseen(card, type: NotificationRouter.deviceInstallationDeletedType) == ForeseenReads())
        #expect(Self.foreseen(#"{"action":"refreshWallet","digitalCardId":"DC-1"}"#) == ForeseenReads())
        #expect(Self.foreseen(#"{"sender":"MG","digitalCardId":"DC-1""#) == ForeseenReads())
        var settings = RoutingSettings()
        settings.maximumBodyBytes = 10
        #expect(Self.foreseen(card, settings: settings) == ForeseenReads())
    }

    // MARK: - Helpers

    static func foreseen(_ json: String, type: String? = nil, settings: RoutingSettings = RoutingSettings())
        -> ForeseenReads
    {
        var reads = ForeseenReads()
        NotificationRouter(settings: settings).foreseeReads(
            of: InboundMessage(body: Array(json.utf8), properties: InboundProperties(messageID: "m", type: type)),
            into: &reads)
        return reads
    }

    /// Routes `body` against cards in every state (`PropertyFixtures.state`) and against none.
    static func expectForeseen(body: [UInt8], type: String?, sourceLocation: SourceLocation = #_sourceLocation) {
        let router = NotificationRouter()
        let message = InboundMessage(body: body, properties: InboundProperties(messageID: "mid", type: type))
        for state in [PropertyFixtures.state, InMemoryWalletState()] {
            let recorder = ReadRecorder(state)
            let decision = try? router.route(message, state: recorder, now: PropertyTests.now)
            var foreseen = ForeseenReads()
            let parsed = router.foreseeReads(of: message, into: &foreseen)
            let shared = try? router.route(message, body: parsed, state: state, now: PropertyTests.now)
            if shared != decision {
                let text = String(decoding: body, as: UTF8.self)
                Issue.record(
                    "the foreseen body routes differently for type \(type ?? "nil") body \(text)",
                    sourceLocation: sourceLocation)
            }
            let unforeseen = recorder.unforeseen(by: router, message: message)
            if !unforeseen.isEmpty {
                Issue.record(
                    "not foreseen \(unforeseen) for type \(type ?? "nil") body \(String(decoding: body, as: UTF8.self))",
                    sourceLocation: sourceLocation)
            }
        }
    }
}

/// A state that answers from an `InMemoryWalletState` and notes every read.
private final class ReadRecorder: WalletStateReading, @unchecked Sendable {
    enum Read: Hashable, CustomStringConvertible {
        case card(String)
        case record(ForeseenReads.Record)
        case history(ForeseenReads.History, limit: Int)

        var description: String {
            switch self {
            case .card(let id): "card \(id)"
            case .record(let key): "record \(key.digitalCardId)/\(key.recordId)"
            case .history(let key, let limit):
                "history \(key.digitalCardId) \(key.auxiliary.map(String.init) ?? "all") \(limit)"
            }
        }
    }

    let state: InMemoryWalletState
    private(set) var reads: [Read] = []

    init(_ state: InMemoryWalletState) {
        self.state = state
    }

    func card(_ digitalCardId: String) throws -> CardRecord? {
        reads.append(.card(digitalCardId))
        return state.card(digitalCardId)
    }

    func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool {
        reads.append(.record(ForeseenReads.Record(digitalCardId: digitalCardId, recordId: recordId)))
        return state.hasTransaction(digitalCardId: digitalCardId, recordId: recordId)
    }

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
        reads.append(.history(ForeseenReads.History(digitalCardId: digitalCardId, auxiliary: auxiliary), limit: limit))
        return state.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
    }

    /// The reads `router.foreseeReads(of: message)` does not cover (a history read of more records than foreseen
    /// counts as not covered).
    func unforeseen(by router: NotificationRouter, message: InboundMessage) -> [Read] {
        var foreseen = ForeseenReads()
        router.foreseeReads(of: message, into: &foreseen)
        return reads.filter { read in
            switch read {
            case .card(let id): !foreseen.cards.contains(id)
            case .record(let key): !foreseen.records.contains(key)
            case .history(let key, let limit): (foreseen.histories[key] ?? -1) < limit
            }
        }
    }
}

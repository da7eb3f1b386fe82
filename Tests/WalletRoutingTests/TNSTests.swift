import Foundation
import TestSupport
import Testing

@testable import WalletRouting

@Suite("TNS: transaction notifications (CONTRACT.md §4)")
struct TNSTests {
    static let action = "TNS:PaymentTransactionNotification"

    static func record(
        id: String, date: String = "2026-11-20T10:15:00Z", auxiliary: Bool? = nil, extra: String = ""
    ) -> String {
        let aux = auxiliary.map { #","isAuxiliaryTransaction":\#($0)"# } ?? ""
        return
            #"{"id":"\#(id)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":12.50\#(aux)\#(extra)}"#
    }

    static func notification(card: String = "DC-1", recordType: String? = nil, transaction: String? = nil) -> String {
        var json = #"{"sender":"TNS","action":"\#(action)","digitalCardId":"\#(card)""#
        if let recordType { json += #","transactionRecordType":\#(recordType)"# }
        if let transaction { json += #","transaction":\#(transaction)"# }
        return json + "}"
    }

    static func activeWallet() -> Wallet {
        var wallet = Wallet()
        wallet.seed("DC-1", .active)
        return wallet
    }

    static func recordIds(_ decision: Decision) throws -> [String] {
        let body = try #require(try decision.bodies.first)
        let records = try #require(body["records"]?.arrayValue)
        return records.compactMap { $0.objectValue?.string("id") }
    }

    // MARK: - Bad input (§8), in the contract's order

    @Test(arguments: [
        (#"{"sender":"TNS","digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"TNS","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"TNS","action":null,"digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"TNS","action":5,"digitalCardId":"DC-1"}"#, "action"),
        (#"{"sender":"TNS","action":"x"}"#, "action"),  // action is checked first
        (#"{"sender":"TNS","action":"TNS:PaymentTransactionNotification"}"#, "digitalCardId"),
        (#"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":""}"#, "digitalCardId"),
        (#"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":null}"#, "digitalCardId"),
        (#"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":7}"#, "digitalCardId"),
        (
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","transactionRecordType":"x"}"#,
            "digitalCardId"
        ),
        (notification(recordType: #""""#), "transactionRecordType"),
        (notification(recordType: #""both""#), "transactionRecordType"),
        (notification(recordType: "1"), "transactionRecordType"),
        (notification(recordType: "true"), "transactionRecordType"),
        (notification(recordType: #"["primary"]"#), "transactionRecordType"),
        (notification(recordType: #""x""#, transaction: "5"), "transactionRecordType"),
        (notification(transaction: "5"), "transaction"),
        (notification(transaction: #""T-1""#), "transaction"),
        (notification(transaction: "[]"), "transaction"),
    ])
    func badInputIsRejectedNamingTheField(_ json: String, _ field: String) throws {
        var wallet = Self.activeWallet()
        let decision = try wallet.send(json)
        let reason = try #require(decision.rejectionReason)
        #expect(reason.hasPrefix(field))
        #expect(decision.disposition == .deadLetter(reason: reason))
        #expect(decision.outcome == .rejected)
        #expect(decision.results.map(\.routingKey) == ["notification.rejected"])
        #expect(decision.results.map(\.exchange) == ["wallet.events"])
        #expect(decision.effects.isEmpty)
        #expect(try decision.bodies[0].string("sender") == "TNS")
    }

    /// Each malformed field of the embedded record; the reason names `transaction.<field>`.
    @Test(arguments: [
        (
            #"{"date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.id"
        ),
        (
            #"{"id":"","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.id"
        ),
        (
            #"{"id":9,"date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.id"
        ),
        (#"{"id":"T","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#, "transaction.date"),
        (
            #"{"id":"T","date":"2026-11-20 10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.date"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.date"
        ),
        (
            #"{"id":"T","date":1795169700,"status":"approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.date"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.status"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"Approved","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.status"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"pending","type":"purchase","currencyCode":"EUR","amount":1}"#,
            "transaction.status"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","currencyCode":"EUR","amount":1}"#,
            "transaction.type"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"transfer","currencyCode":"EUR","amount":1}"#,
            "transaction.type"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","amount":1}"#,
            "transaction.currencyCode"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"eur","amount":1}"#,
            "transaction.currencyCode"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EURO","amount":1}"#,
            "transaction.currencyCode"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"E1R","amount":1}"#,
            "transaction.currencyCode"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR"}"#,
            "transaction.amount"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":"12.50"}"#,
            "transaction.amount"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":null}"#,
            "transaction.amount"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1,"merchantName":5}"#,
            "transaction.merchantName"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1,"terminalID":[]}"#,
            "transaction.terminalID"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1,"isAuxiliaryTransaction":"false"}"#,
            "transaction.isAuxiliaryTransaction"
        ),
        (
            #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1,"isAuxiliaryTransaction":0}"#,
            "transaction.isAuxiliaryTransaction"
        ),
    ])
    func malformedRecordIsRejected(_ record: String, _ field: String) throws {
        var wallet = Self.activeWallet()
        let decision = try wallet.send(Self.notification(transaction: record))
        let reason = try #require(decision.rejectionReason)
        #expect(reason.hasPrefix(field))
        #expect(decision.outcome == .rejected)
        #expect(wallet.state.transactions(digitalCardId: "DC-1").isEmpty)
    }

    @Test func recordIsValidatedBeforeTheCardIsLookedUp() throws {
        var wallet = Wallet()  // DC-1 unknown
        let decision = try wallet.send(Self.notification(transaction: #"{"id":"T-1"}"#))
        #expect(decision.outcome == .rejected)
        #expect(decision.rejectionReason?.hasPrefix("transaction.") == true)
    }

    @Test(arguments: ["type", "status"])
    func everyEnumeratedValueIsAccepted(_ field: String) throws {
        let values =
            field == "type"
            ? ["purchase", "refund", "atmWithdrawal", "atmOtherService", "other"]
            : ["approved", "declined", "cleared", "refunded"]
        for value in values {
            var wallet = Self.activeWallet()
            let record =
                #"{"id":"T","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":-1,"\#(field)":"\#(value)"}"#
            let decision = try wallet.send(Self.notification(transaction: record))
            #expect(decision.outcome == .processed, "\(field) \(value)")
        }
    }

    // MARK: - Card and storage

    @Test(arguments: [CardState?.none, .deleted])
    func unknownOrDeletedCardIsAnError(_ state: CardState?) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", state)
        let decision = try wallet.send(
            Self.notification(recordType: #""PRIMARY""#, transaction: Self.record(id: "T-1")))
        let body = try #require(try decision.bodies.first)
        #expect(
            body.keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "digitalCardId",
                "transactionRecordType", "error",
            ])
        #expect(body.string("kind") == "transactionRecords")
        #expect(body.string("transactionRecordType") == "primary")
        #expect(body.object("error")?.string("kind") == "unknownDigitalCardID")
        #expect(body.object("error")?.string("message")?.isEmpty == false)
        #expect(body["records"] == nil)
        #expect(decision.primaries.map(\.routingKey) == ["transactions.error"])
        #expect(decision.primaries.map(\.exchange) == ["wallet.transactions"])
        #expect(decision.outcome == .domainError)
        #expect(decision.disposition == .acknowledge)
        #expect(decision.effects.isEmpty)
    }

    @Test(arguments: [CardState.active, .suspended])
    func recordIsStoredAndShown(_ state: CardState) throws {
        var wallet = Wallet()
        wallet.seed("DC-1", state)
        let record =
            #"{"id":"T-9","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":12.50,"displayAmount":"12.50","merchantName":"Cafe","merchantType":"5814","merchantPostalCode":"75001","terminalID":"TRM1","merchantID":"M1","isAuxiliaryTransaction":false,"unknown":{"x":1}}"#
        let decision = try wallet.send(Self.notification(transaction: record))
        let body = try #require(try decision.bodies.first)
        #expect(
            body.keys == [
                "kind", "messageId", "correlationId", "sender", "processedAt", "digitalCardId",
                "transactionRecordType", "records",
            ])
        #expect(body.isNull("transactionRecordType"))
        #expect(decision.primaries.map(\.routingKey) == ["transactions.records"])
        #expect(decision.outcome == .processed)
        let echoed =
            #"{"id":"T-9","date":"2026-11-20T10:15:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":12.50,"displayAmount":"12.50","merchantName":"Cafe","merchantType":"5814","merchantPostalCode":"75001","terminalID":"TRM1","merchantID":"M1","isAuxiliaryTransaction":false}"#
        #expect(decision.primaries[0].text.contains(#""records":[\#(echoed)]"#))
        #expect(wallet.state.transactions(digitalCardId: "DC-1").map(\.id) == ["T-9"])
        guard case .storeTransaction(let card, let stored) = try #require(decision.effects.first) else {
            Issue.record("expected storeTransaction")
            return
        }
        #expect(card == "DC-1")
        #expect(stored.instant == 1_795_169_700)
        #expect(stored.amount.literal == "12.50")
    }

    @Test func absentOptionalsAreOmittedAndAuxiliaryAlwaysPresent() throws {
        var wallet = Self.activeWallet()
        let record =
            #"{"id":"T-1","date":"2026-11-20T10:15:00.250+01:00","status":"refunded","type":"refund","currencyCode":"USD","amount":-3e2,"merchantName":null,"isAuxiliaryTransaction":null}"#
        let decision = try wallet.send(Self.notification(transaction: record))
        #expect(
            decision.primaries[0].text.contains(
                #""records":[{"id":"T-1","date":"2026-11-20T10:15:00.250+01:00","status":"refunded","type":"refund","currencyCode":"USD","amount":-3e2,"isAuxiliaryTransaction":false}]"#
            ))
    }

    @Test func duplicateRecordIdKeepsTheFirst() throws {
        var wallet = Self.activeWallet()
        try wallet.send(Self.notification(transaction: Self.record(id: "T-1", extra: #","merchantName":"First""#)))
        let decision = try wallet.send(
            Self.notification(transaction: Self.record(id: "T-1", extra: #","merchantName":"Second""#)))
        #expect(decision.effects.isEmpty)
        #expect(decision.outcome == .processed)
        let records = try #require(try decision.bodies[0]["records"]?.arrayValue)
        #expect(records.count == 1)
        #expect(records[0].objectValue?.string("merchantName") == "First")
        #expect(wallet.state.transactions(digitalCardId: "DC-1").count == 1)
    }

    @Test func recordIdsAreUniquePerCardNotGlobally() throws {
        var wallet = Self.activeWallet()
        wallet.seed("DC-2", .active)
        try wallet.send(Self.notification(transaction: Self.record(id: "T-1")))
        let decision = try wallet.send(Self.notification(card: "DC-2", transaction: Self.record(id: "T-1")))
        #expect(decision.effects.count == 1)
    }

    @Test func withoutARecordTheViewIsShown() throws {
        var wallet = Self.activeWallet()
        try wallet.send(Self.notification(transaction: Self.record(id: "T-1")))
        let decision = try wallet.send(Self.notification(transaction: "null"))
        #expect(try Self.recordIds(decision) == ["T-1"])
        #expect(decision.effects.isEmpty)
        let empty = try wallet.send(Self.notification(card: "DC-1", recordType: #""auxiliary""#))
        #expect(try Self.recordIds(empty) == [])
    }

    // MARK: - The view

    @Test(arguments: [
        (#""primary""#, ["P2", "P1"], "primary"),
        (#""Auxiliary""#, ["A2", "A1"], "auxiliary"),
        ("null", ["A2", "P2", "A1", "P1"], nil),
        (nil, ["A2", "P2", "A1", "P1"], nil),
    ])
    func viewFiltersByRecordType(_ recordType: String?, _ expected: [String], _ echoed: String?) throws {
        var wallet = Self.activeWallet()
        try wallet.send(
            Self.notification(transaction: Self.record(id: "P1", date: "2026-11-01T00:00:00Z", auxiliary: false)))
        try wallet.send(
            Self.notification(transaction: Self.record(id: "A1", date: "2026-11-02T00:00:00Z", auxiliary: true)))
        try wallet.send(Self.notification(transaction: Self.record(id: "P2", date: "2026-11-03T00:00:00Z")))
        let decision = try wallet.send(
            Self.notification(
                recordType: recordType,
                transaction: Self.record(id: "A2", date: "2026-11-04T00:00:00Z", auxiliary: true)))
        #expect(try Self.recordIds(decision) == expected)
        #expect(try decision.bodies[0]["transactionRecordType"] == echoed.map(JSONValue.string) ?? .null)
        #expect(wallet.state.transactions(digitalCardId: "DC-1").count == 4)  // storage keeps everything
    }

    @Test func newestFirstAndTiesShowTheLaterStoredFirst() throws {
        var wallet = Self.activeWallet()
        // Same instant written three ways; the later stored comes first.
        try wallet.send(Self.notification(transaction: Self.record(id: "T-a", date: "2026-11-10T12:00:00Z")))
        try wallet.send(Self.notification(transaction: Self.record(id: "T-old", date: "2026-11-09T12:00:00Z")))
        try wallet.send(Self.notification(transaction: Self.record(id: "T-b", date: "2026-11-10T13:00:00+01:00")))
        try wallet.send(Self.notification(transaction: Self.record(id: "T-new", date: "2026-11-10T12:00:00.001Z")))
        let decision = try wallet.send(
            Self.notification(transaction: Self.record(id: "T-c", date: "2026-11-10T07:00:00-05:00")))
        #expect(try Self.recordIds(decision) == ["T-new", "T-c", "T-b", "T-a", "T-old"])
    }

    @Test func thirtyDayWindowBeforeTheNewestKeptRecordIsInclusive() throws {
        var wallet = Self.activeWallet()
        try wallet.send(Self.notification(transaction: Self.record(id: "too-old", date: "2026-10-11T11:59:59.999Z")))
        try wallet.send(Self.notification(transaction: Self.record(id: "edge", date: "2026-10-11T12:00:00Z")))
        try wallet.send(Self.notification(transaction: Self.record(id: "mid", date: "2026-10-30T00:00:00Z")))
        // A newer auxiliary record does not move the window of the primary view.
        try wallet.send(
            Self.notification(transaction: Self.record(id: "aux", date: "2026-12-30T00:00:00Z", auxiliary: true)))
        let decision = try wallet.send(
            Self.notification(
                recordType: #""primary""#, transaction: Self.record(id: "newest", date: "2026-11-10T12:00:00Z")))
        #expect(try Self.recordIds(decision) == ["newest", "mid", "edge"])
        let all = try wallet.send(Self.notification(transaction: "null"))
        #expect(try Self.recordIds(all) == ["aux"])
    }

    @Test func viewIsLimitedToTen() throws {
        var wallet = Self.activeWallet()
        for day in 1...12 {
            let date = "2026-11-\(day < 10 ? "0" : "")\(day)T00:00:00Z"
            try wallet.send(Self.notification(transaction: Self.record(id: "T-\(day)", date: date)))
        }
        // An older record is stored but not shown.
        let decision = try wallet.send(
            Self.notification(transaction: Self.record(id: "T-0", date: "2026-10-31T00:00:00Z")))
        #expect(try Self.recordIds(decision) == (3...12).reversed().map { "T-\($0)" })
        #expect(decision.effects.count == 1)
        #expect(wallet.state.transactions(digitalCardId: "DC-1").count == 13)
    }

    @Test func limitsAreConfigurable() throws {
        var settings = RoutingSettings()
        settings.transactionHistoryLimit = 2
        settings.transactionHistoryWindowSeconds = 86_400
        var wallet = Wallet(settings: settings)
        wallet.seed("DC-1", .active)
        try wallet.send(Self.notification(transaction: Self.record(id: "T-1", date: "2026-11-01T00:00:00Z")))
        try wallet.send(Self.notification(transaction: Self.record(id: "T-2", date: "2026-11-02T00:00:00Z")))
        var decision = try wallet.send(
            Self.notification(transaction: Self.record(id: "T-3", date: "2026-11-02T12:00:00Z")))
        #expect(try Self.recordIds(decision) == ["T-3", "T-2"])
        decision = try wallet.send(Self.notification(transaction: Self.record(id: "T-4", date: "2026-11-03T12:00:01Z")))
        #expect(try Self.recordIds(decision) == ["T-4"])
    }

    @Test func actionAndRecordTypeValuesAreCaseInsensitive() throws {
        var wallet = Self.activeWallet()
        let decision = try wallet.send(
            #"{"Sender":"tns","ACTION":"tns:paymenttransactionnotification","digitalcardid":"DC-1","TransactionRecordType":"AUXILIARY"}"#
        )
        #expect(decision.outcome == .processed)
        #expect(try decision.bodies[0].string("transactionRecordType") == "auxiliary")
        #expect(decision.sender == "TNS")
    }

    // MARK: - Dates

    @Test(arguments: [
        ("2026-11-20T10:15:00Z", 1_795_169_700.0),
        ("2026-11-20T10:15:00.5Z", 1_795_169_700.5),
        ("2026-11-20T11:15:00+01:00", 1_795_169_700.0),
        ("2026-11-20T05:15:00-05:00", 1_795_169_700.0),
        ("2026-11-20T10:15:00-00:00", 1_795_169_700.0),
        ("1970-01-01T00:00:00Z", 0.0),
        ("1969-12-31T23:59:59Z", -1.0),
        ("2000-02-29T00:00:00Z", 951_782_400.0),
        ("2024-12-31T23:59:59.123456789123Z", 1_735_689_599.123456789),
        ("9999-12-31T23:59:59Z", 253_402_300_799.0),
        ("0000-01-01T00:00:00Z", -62_167_219_200.0),
    ])
    func validDates(_ text: String, _ epochSeconds: Double) {
        let parsed = ISO8601Instant.epochSeconds(text)
        #expect(parsed != nil)
        #expect(abs((parsed ?? .nan) - epochSeconds) < 1e-6)
    }

    @Test(arguments: [
        "", "2026-11-20", "2026-11-20T10:15Z", "2026-11-20T10:15:00", "2026-11-20t10:15:00Z", "2026-11-20T10:15:00z",
        "2026-11-20 10:15:00Z", "2026-13-20T10:15:00Z", "2026-00-20T10:15:00Z", "2026-11-31T10:15:00Z",
        "2026-02-29T10:15:00Z", "1900-02-29T00:00:00Z", "2026-11-00T10:15:00Z", "2026-11-20T24:00:00Z",
        "2026-11-20T10:60:00Z", "2026-11-20T10:15:60Z", "2026-11-20T10:15:00.Z", "2026-11-20T10:15:00,5Z",
        "2026-11-20T10:15:00+0100", "2026-11-20T10:15:00+01", "2026-11-20T10:15:00+24:00", "2026-11-20T10:15:00+01:60",
        "2026-11-20T10:15:00Z ", " 2026-11-20T10:15:00Z", "20261120T101500Z", "+2026-11-20T10:15:00Z",
        "2026-11-20T10:15:00+01:00Z", "2026-1-20T10:15:00Z", "２026-11-20T10:15:00Z", "2026-11-20T10:15:00.1234x",
    ])
    func invalidDates(_ text: String) {
        #expect(ISO8601Instant.epochSeconds(text) == nil)
    }

    @Test(.cpuBound) func datesAgreeWithFoundationOverManyInstants() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let seconds = Double(Int64.random(in: -2_000_000_000...8_000_000_000, using: &generator))
            let offsetMinutes = Int.random(in: -14 * 60...14 * 60, using: &generator)
            formatter.timeZone = TimeZone(secondsFromGMT: offsetMinutes * 60)
            let text = formatter.string(from: Date(timeIntervalSince1970: seconds))
            #expect(ISO8601Instant.epochSeconds(text) == seconds, "\(text)")
        }
    }
}

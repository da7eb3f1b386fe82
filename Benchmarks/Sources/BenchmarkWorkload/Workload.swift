// The deterministic message mix shared by routing-benchmark and worker-load (../../JOURNAL.md, "What it measures").
import WalletRouting

/// A deterministic generator (SplitMix64), so every run and every machine measures the same messages.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64

    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a message of the mix is, for the per-kind figures.
public enum MessageKind: String, CaseIterable, Sendable {
    case tns = "TNS"
    case cps = "CPS"
    case mg = "MG"
    case nonSDK = "non-SDK"
    case malformed = "malformed"
}

public struct Workload {
    public static let cardCount = 5_000
    /// Share of card references that name a card never installed (unknown-card paths).
    public static let unknownCardRate = 0.03
    /// Records stored per card before the measurement.
    public static let historyPerCard = 8

    public var setup: [InboundMessage] = []
    public var messages: [InboundMessage] = []
    public var kinds: [MessageKind] = []

    /// `count` messages: 45% TNS, 30% CPS, 15% MG, 7% non-SDK, 3% malformed; bodies of 150-400 bytes.
    public init(count: Int, seed: UInt64 = 0x5EED) {
        var rng = SplitMix64(state: seed)
        setup = Self.installations(using: &rng)
        messages.reserveCapacity(count)
        kinds.reserveCapacity(count)
        for index in 0..<count {
            let roll = Double.random(in: 0..<1, using: &rng)
            let kind: MessageKind =
                switch roll {
                case ..<0.45: .tns
                case ..<0.75: .cps
                case ..<0.90: .mg
                case ..<0.97: .nonSDK
                default: .malformed
                }
            let body: String
            switch kind {
            case .tns: body = Self.tns(index: index, using: &rng)
            case .cps: body = Self.cps(using: &rng)
            case .mg: body = Self.mg(using: &rng)
            case .nonSDK: body = Self.nonSDK(index: index, using: &rng)
            case .malformed: body = ""
            }
            let bytes = kind == .malformed ? Self.malformed(using: &rng) : Array(body.utf8)
            messages.append(InboundMessage(body: bytes, properties: Self.properties(index: index, using: &rng)))
            kinds.append(kind)
        }
    }

    // MARK: - Cards

    static func cardId(_ number: Int) -> String {
        let digits = String(number)
        return "DC-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    /// A card reference: an installed card most of the time.
    static func someCard(using rng: inout SplitMix64) -> String {
        if Double.random(in: 0..<1, using: &rng) < unknownCardRate {
            return cardId(cardCount + Int.random(in: 0..<cardCount, using: &rng))
        }
        return cardId(Int.random(in: 0..<cardCount, using: &rng))
    }

    /// Installs every card (10% LUK), then suspends 4% and deletes 1% of them, as CPS messages.
    static func installations(using rng: inout SplitMix64) -> [InboundMessage] {
        var setup: [InboundMessage] = []
        for number in 0..<cardCount {
            let keyType = number % 10 == 0 ? #","keyType":"LUK""# : ""
            setup.append(
                message(
                    #"{"sender":"CPS","digitalCardId":"\#(cardId(number))","tokenizedCardId":"TK-\#(number)-7f3a9c"\#(keyType),"serverMessage":{"code":"CBP.info.tokenProvisioned","text":"Card provisioned","severity":"info","params":[]}}"#,
                    id: "setup-install-\(number)"))
        }
        for number in 0..<cardCount {
            let roll = Double.random(in: 0..<1, using: &rng)
            let code = roll < 0.01 ? "CBP.info.tokenDeleted" : roll < 0.05 ? "CBP.info.tokenSuspended" : nil
            guard let code else { continue }
            setup.append(
                message(
                    #"{"sender":"CPS","digitalCardId":"\#(cardId(number))","serverMessage":{"code":"\#(code)","text":"By issuer","severity":"info","params":[]}}"#,
                    id: "setup-state-\(number)"))
        }
        // A history, so TNS results echo what a card in service returns (up to 10 records), from the first pass on.
        for number in 0..<cardCount {
            for record in 0..<historyPerCard {
                setup.append(
                    message(
                        tns(
                            index: -(number * historyPerCard + record) - 1, card: cardId(number),
                            recordType: "", using: &rng), id: "setup-history-\(number)-\(record)"))
            }
        }
        return setup
    }

    static func message(_ body: String, id: String) -> InboundMessage {
        InboundMessage(body: Array(body.utf8), properties: InboundProperties(messageID: id))
    }

    static func properties(index: Int, using rng: inout SplitMix64) -> InboundProperties {
        let trace = "00-\(hex(rng.next()))\(hex(rng.next()))-\(hex(rng.next()))-01"
        return InboundProperties(
            messageID: "msg-\(index)",
            correlationID: index % 2 == 0 ? "corr-\(index)" : nil,
            timestamp: 1_795_247_000,
            traceparent: trace)
    }

    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    // MARK: - Bodies

    static let merchants = [
        "Cafe de la Gare", "Boulangerie Paul", "SNCF", "Monoprix", "Shell Station 42", "Amazon EU",
        "Le Petit Bistro", "Pharmacie Centrale",
    ]

    static func tns(index: Int, using rng: inout SplitMix64) -> String {
        let card = someCard(using: &rng)
        let recordType = ["", "", "", #","transactionRecordType":"primary""#, #","transactionRecordType":"auxiliary""#]
            .randomElement(using: &rng)!
        return tns(index: index, card: card, recordType: recordType, using: &rng)
    }

    static func tns(index: Int, card: String, recordType: String, using rng: inout SplitMix64) -> String {
        if index >= 0, Double.random(in: 0..<1, using: &rng) < 0.10 {
            // A notification without an embedded record: the device just asks for the history.
            return
                #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)"\#(recordType),"aps":{"content-available":1},"requestedAt":"2026-11-21T07:59:58Z"}"#
        }
        let day = Int.random(in: 1...30, using: &rng)
        let month = day > 20 ? 10 : 11
        let date =
            "2026-\(month)-\(day < 10 ? "0" : "")\(day)T\(Int.random(in: 10...23, using: &rng)):\(Int.random(in: 10...59, using: &rng)):00Z"
        let cents = Int.random(in: 100...25_000, using: &rng)
        let amount = "\(cents / 100).\(cents % 100 < 10 ? "0" : "")\(cents % 100)"
        let auxiliary = Int.random(in: 0..<10, using: &rng) == 0
        let merchant = merchants.randomElement(using: &rng)!
        if Bool.random(using: &rng) {
            return
                #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)"\#(recordType),"transaction":{"id":"T-\#(index)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(amount),"displayAmount":"\#(amount)","merchantName":"\#(merchant)","merchantType":"5814","merchantID":"M-91","isAuxiliaryTransaction":\#(auxiliary)}}"#
        }
        return
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)"\#(recordType),"transaction":{"id":"T-\#(index)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(amount),"merchantName":"\#(merchant)","isAuxiliaryTransaction":\#(auxiliary)}}"#
    }

    static let cpsCodes: [(code: String, text: String, weight: Double)] = [
        ("CBP.info.paymentAccepted", "Payment accepted", 0.35),
        ("CBP.info.tokenSuspended", "Card suspended by issuer", 0.12),
        ("CBP.info.tokenResumed", "Card resumed by issuer", 0.12),
        ("CBP.info.tokenReplenished", "Payment keys replenished", 0.15),
        ("CBP.info.tokenRenewed", "Card renewed", 0.10),
        ("CBP.info.tokenODACertRenewed", "ODA certificate renewed", 0.05),
        ("CBP.info.tokenProvisioned", "Card provisioned", 0.06),
        ("CBP.error.pinLocked", "PIN locked", 0.05),
    ]

    static func serverMessage(using rng: inout SplitMix64) -> String {
        var roll = Double.random(in: 0..<1, using: &rng)
        var chosen = cpsCodes[0]
        for entry in cpsCodes {
            roll -= entry.weight
            if roll < 0 {
                chosen = entry
                break
            }
        }
        return #"{"code":"\#(chosen.code)","text":"\#(chosen.text)","severity":"info","params":[]}"#
    }

    static func cps(using rng: inout SplitMix64) -> String {
        let card = someCard(using: &rng)
        if Double.random(in: 0..<1, using: &rng) < 0.10 {
            return
                #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)-7f3a9c","serverMessages":[\#(serverMessage(using: &rng)),\#(serverMessage(using: &rng))]}"#
        }
        return
            #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)-7f3a9c","serverMessage":\#(serverMessage(using: &rng)),"aps":{"content-available":1}}"#
    }

    static func mg(using rng: inout SplitMix64) -> String {
        let card = someCard(using: &rng)
        return
            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)","aps":{"content-available":1},"requestId":"rq-\#(hex(rng.next()))"}"#
    }

    static func nonSDK(index: Int, using rng: inout SplitMix64) -> String {
        if Bool.random(using: &rng) {
            return
                #"{"action":"showOffer","aps":{"alert":{"title":"Your card is ready","body":"Tap to add it to your wallet"},"sound":"default"},"offerId":"of-\#(index)","campaign":"winter-2026"}"#
        }
        return
            #"{"action":"refreshWallet","aps":{"content-available":1},"message":"Wallet refresh requested","reason":"profileUpdated","userId":"u-\#(index)","sentAt":"2026-11-21T07:59:58Z"}"#
    }

    /// Bad input the worker must dead-letter: truncated JSON, a body that is not an object, invalid UTF-8.
    static func malformed(using rng: inout SplitMix64) -> [UInt8] {
        let valid = Array(cps(using: &rng).utf8)
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return Array(valid.dropLast(Int.random(in: 1...20, using: &rng)))
        case 1: return Array("[".utf8) + valid + Array("]".utf8)
        default:
            var bytes = valid
            bytes[Int.random(in: 60..<(bytes.count - 5), using: &rng)] = 0xFF
            return bytes
        }
    }
}

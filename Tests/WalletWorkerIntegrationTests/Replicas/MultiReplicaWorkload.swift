import AMQPTransport
import Foundation
import TestSupport
import WalletRouting
import WalletWorker

/// One inbound message of the multi-replica test, as a backend publishes it.
struct ReplicaMessage: Sendable {
    var id: String
    var body: [UInt8]
    /// The `digitalCardId` header (the ordered mode's hash key): the body's card id as the routing core reads it,
    /// set the way `wallet-notify` sets it; nil when the body has none (those all land in one shard).
    var cardHeader: String?
    /// Bad input (CONTRACT.md §8): dead-lettered, never recorded as processed.
    var isMalformed: Bool
    /// The record id of a TNS message embedding a transaction record.
    var recordID: String?

    init(id: String, body: [UInt8], isMalformed: Bool = false, recordID: String? = nil) {
        self.id = id
        self.body = body
        self.isMalformed = isMalformed
        self.recordID = recordID
        cardHeader = InboundMessage(body: body).bodyDigitalCardId
    }

    init(id: String, json: String, isMalformed: Bool = false, recordID: String? = nil) {
        self.init(id: id, body: Array(json.utf8), isMalformed: isMalformed, recordID: recordID)
    }

    var inbound: InboundMessage {
        InboundMessage(body: body, properties: InboundProperties(messageID: id))
    }

    func outbound(to exchange: String) -> AMQPOutboundMessage {
        AMQPOutboundMessage(
            exchange: exchange, routingKey: "wallet.notification", body: body,
            properties: AMQPMessageProperties(
                contentType: "application/json",
                headers: cardHeader.map { [ShardedTopology.cardHeader: .string($0)] },
                deliveryMode: .persistent, messageID: id),
            mandatory: true)
    }
}

/// The 30,000 messages of the multi-replica test (issue 5), deterministic (a fixed seed): long CPS sequences per
/// card (install, many suspend/resume, stacks, replenish and informational codes, a quarter ending in delete and
/// a few messages after it), TNS records (some repeating a record id, some with older dates) and queries, MG,
/// non-SDK actions, a known set of malformed inputs, and duplicated `message_id`s: the same message published
/// again a few messages later, or at the very end (`lateDuplicates`, published after the SIGKILL and restart).
struct ReplicaWorkload: Sendable {
    static let totalMessages = 30_000
    static let cardCount = 250
    static let stepsPerCard = 96
    static let nearDuplicates = 1_500
    static let lateDuplicateCount = 1_200
    static let malformedPerKind = 15

    /// Published first, in this order.
    var main: [ReplicaMessage]
    /// Published last: copies of messages from the first 60% of `main`.
    var lateDuplicates: [ReplicaMessage]
    var cards: [String]
    var malformedIDs: Set<String>

    var all: [ReplicaMessage] { main + lateDuplicates }
    var distinctIDs: Set<String> { Set(main.map(\.id)) }

    static func card(_ number: Int) -> String { "MR-\(number)" }
    static func tokenizedCard(_ card: String) -> String { "TK-\(card)" }
    /// Every fifth card is installed with LUK keys.
    static func keyType(_ number: Int) -> String? { number % 5 == 0 ? "LUK" : nil }

    init(seed: UInt64 = 0x5EED_0005) {
        var random = SplitMix64(seed: seed)
        cards = (0..<Self.cardCount).map(Self.card)

        // Each card's messages in its order, then the other messages; interleaved at random keeping each
        // source's order, as many backends sending at once would.
        var sources: [[ReplicaMessage]] = (0..<Self.cardCount).map { Self.cardScript($0, random: &random) }
        let malformed = Self.malformedMessages(random: &random)
        malformedIDs = Set(malformed.map(\.id))
        let cardMessageCount = sources.reduce(0) { $0 + $1.count }
        let actionCount =
            Self.totalMessages - cardMessageCount - malformed.count - Self.nearDuplicates
            - Self.lateDuplicateCount
        precondition(actionCount > 0, "the card scripts leave no room for actions")
        var others = malformed + (0..<actionCount).map(Self.action)
        others.shuffle(using: &random)
        sources.append(others)
        var tags = sources.indices.flatMap { Array(repeating: $0, count: sources[$0].count) }
        tags.shuffle(using: &random)
        var positions = Array(repeating: 0, count: sources.count)
        var stream: [ReplicaMessage] = []
        stream.reserveCapacity(Self.totalMessages)
        for tag in tags {
            stream.append(sources[tag][positions[tag]])
            positions[tag] += 1
        }

        // The same message again 1 to 20 messages later (often in the same batch or one taken by another replica).
        let candidates = stream.indices.filter { !stream[$0].isMalformed }
        var insertions: [Int: [ReplicaMessage]] = [:]
        for index in candidates.shuffled(using: &random).prefix(Self.nearDuplicates) {
            let target = min(stream.count - 1, index + Int.random(in: 1...20, using: &random))
            insertions[target, default: []].append(stream[index])
        }
        var withDuplicates: [ReplicaMessage] = []
        withDuplicates.reserveCapacity(Self.totalMessages)
        for (index, message) in stream.enumerated() {
            withDuplicates.append(message)
            withDuplicates += insertions[index] ?? []
        }
        main = withDuplicates
        let early = main.prefix(main.count * 6 / 10).filter { !$0.isMalformed }
        lateDuplicates = Array(early.shuffled(using: &random).prefix(Self.lateDuplicateCount))
    }

    // MARK: - A card's messages

    private static func cardScript(_ number: Int, random: inout SplitMix64) -> [ReplicaMessage] {
        let card = card(number)
        var step = 0
        func nextID() -> String {
            defer { step += 1 }
            return "mr-\(card)-\(step)"
        }
        func cps(_ codes: [String]) -> ReplicaMessage {
            let messages = codes.map { #"{"code":"\#($0)","text":"\#(card) \#($0)","severity":"info","params":[]}"# }
            let payload =
                codes.count == 1
                ? #""serverMessage":\#(messages[0])"# : #""serverMessages":[\#(messages.joined(separator: ","))]"#
            let keyType =
                codes == ["CBP.info.tokenProvisioned"] ? keyType(number).map { #","keyType":"\#($0)""# } ?? "" : ""
            return ReplicaMessage(
                id: nextID(),
                json:
                    #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"\#(tokenizedCard(card))"\#(keyType),\#(payload)}"#
            )
        }
        var records = 0
        var recordIDs: [String] = []
        func tns(withRecord: Bool) -> ReplicaMessage {
            var body = #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)""#
            guard withRecord else { return ReplicaMessage(id: nextID(), json: body + "}") }
            // One in fifteen repeats an earlier record id (not stored again); one in ten is dated before the others.
            let recordID: String
            if !recordIDs.isEmpty, Int.random(in: 0..<15, using: &random) == 0 {
                recordID = recordIDs.randomElement(using: &random)!
            } else {
                recordID = "R-\(number)-\(records)"
                recordIDs.append(recordID)
            }
            let minutes = Int.random(in: 0..<10, using: &random) == 0 ? records : 600 + records * 7
            records += 1
            let date = String(
                format: "2026-11-%02dT%02d:%02d:00Z", 10 + minutes / 1440, minutes / 60 % 24, minutes % 60)
            let amount = String(format: "%d.%02d", 1 + records % 90, records % 100)
            body +=
                #","transaction":{"id":"\#(recordID)","date":"\#(date)","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#(amount),"merchantName":"Shop \#(records % 7)"}}"#
            return ReplicaMessage(id: nextID(), json: body, recordID: recordID)
        }
        func mg() -> ReplicaMessage {
            ReplicaMessage(
                id: nextID(),
                json: #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#)
        }

        var script = [cps(["CBP.info.tokenProvisioned"])]
        // The state the card is in when every message is applied in order: each toggle changes it.
        var suspended = false
        for _ in 0..<stepsPerCard {
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case 0..<40:
                script.append(cps([suspended ? "CBP.info.tokenResumed" : "CBP.info.tokenSuspended"]))
                suspended.toggle()
            case 40..<46:
                // A stack that goes there and back.
                script.append(
                    cps(
                        suspended
                            ? ["CBP.info.tokenResumed", "CBP.info.tokenSuspended"]
                            : ["CBP.info.tokenSuspended", "CBP.info.tokenResumed"]))
            case 46..<50:
                script.append(cps(["CBP.info.tokenReplenished"]))
            case 50..<54:
                script.append(cps(["CBP.info.paymentAccepted"]))
            case 54..<80:
                script.append(tns(withRecord: true))
            case 80..<86:
                script.append(tns(withRecord: false))
            default:
                script.append(mg())
            }
        }
        if number % 4 == 3 {
            script.append(cps(["CBP.info.tokenDeleted"]))
            script.append(mg())
            script.append(tns(withRecord: true))
        }
        return script
    }

    // MARK: - Other senders

    private static func action(_ number: Int) -> ReplicaMessage {
        let body =
            number % 3 == 0
            ? #"{"action":"mr.refresh.\#(number % 40)","aps":{"content-available":1}}"#
            : #"{"action":"mr.notice.\#(number % 40)","aps":{"alert":{"title":"Notice \#(number)"}},"message":"m"}"#
        return ReplicaMessage(id: "mr-action-\(number)", json: body)
    }

    /// The known set of bad input: ten kinds, `malformedPerKind` of each; some name a card (and so carry its header).
    private static func malformedMessages(random: inout SplitMix64) -> [ReplicaMessage] {
        var messages: [ReplicaMessage] = []
        for index in 0..<malformedPerKind {
            let card = card(Int.random(in: 0..<cardCount, using: &random))
            func id(_ kind: String) -> String { "mr-bad-\(kind)-\(index)" }
            messages += [
                ReplicaMessage(id: id("not-json"), json: "not json \(index)", isMalformed: true),
                ReplicaMessage(
                    id: id("utf8"), body: [0x7B, 0x22, 0x61, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D], isMalformed: true),
                ReplicaMessage(
                    id: id("bom"), body: [0xEF, 0xBB, 0xBF] + Array(#"{"action":"bom"}"#.utf8), isMalformed: true),
                ReplicaMessage(id: id("array"), json: "[1,2,\(index)]", isMalformed: true),
                ReplicaMessage(
                    id: id("tns-action"), json: #"{"sender":"TNS","action":"TNS:Other","digitalCardId":"\#(card)"}"#,
                    isMalformed: true),
                ReplicaMessage(
                    id: id("mg-no-card"), json: #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification"}"#,
                    isMalformed: true),
                ReplicaMessage(
                    id: id("tns-date"),
                    json:
                        #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)","transaction":{"id":"BAD-\#(index)","date":"2026-13-40T00:00:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":1}}"#,
                    isMalformed: true),
                ReplicaMessage(
                    id: id("too-large"), json: #"{"action":"big","pad":"\#(String(repeating: "x", count: 70_000))"}"#,
                    isMalformed: true),
                ReplicaMessage(
                    id: id("long-action"), json: #"{"action":"\#(String(repeating: "a", count: 201))"}"#,
                    isMalformed: true),
                ReplicaMessage(
                    id: id("record-type"),
                    json:
                        #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"\#(card)","transactionRecordType":""}"#,
                    isMalformed: true),
            ]
        }
        return messages
    }
}

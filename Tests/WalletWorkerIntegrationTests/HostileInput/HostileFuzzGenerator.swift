// The hostile-input generator of the fuzzing run (HostileFuzzChecks.swift): seeded messages that each draw a body
// kind, then hostile properties and headers independently; valid messages and probes between them.
import AMQPTransport
import Foundation
import TestSupport
import WalletRouting

/// One message of the run.
struct FuzzMessage: Sendable {
    enum Role: Sendable { case hostile, valid, probe }

    var seq: Int64
    var role: Role
    var outbound: AMQPOutboundMessage
    /// The `message_id` bytes as published, when there is one.
    var idBytes: [UInt8]?
    /// What a worker's result id starts with: the id when it is valid UTF-8.
    var idText: String? { idBytes.flatMap { String(validating: $0, as: UTF8.self) } }
    /// Whether the message carries `x-fuzz-seq` (else its id is unique and identifies its dead letter).
    var carriesSeq: Bool
    var bodyKind: String
    /// The hostile choices made, for failures and the summary.
    var traits: [String]
    /// The broker may refuse it on publish (closing the channel).
    var mayBeRefused = false
    var refused = false

    var label: String { "#\(seq) \(role) \(idText ?? "<no text id>")" }

    /// Body kinds the contract always rejects (§8).
    static let badBodyKinds: Set<String> = ["random-bytes", "over-limit", "boundary-1", "empty", "not-an-object"]

    var description: String {
        let body = outbound.body
        let preview = String(decoding: body.prefix(80), as: UTF8.self).replacing("\n", with: " ")
        return "#\(seq) body=\(bodyKind) (\(body.count) bytes: \(preview.debugDescription)) "
            + traits.joined(separator: " ")
    }
}

/// Seeded hostile messages: each draws a body kind, then hostile properties and headers independently.
struct HostileGenerator {
    static let seqHeader = "x-fuzz-seq"

    private var random: SplitMix64
    let limit: Int
    let prefix: String
    let exchange: String
    let connectionUser: String?
    let excluded: Set<String>
    private var seq: Int64 = 0
    /// Ids of earlier hostile and valid messages, for duplicates.
    private var earlierIDs: [[UInt8]] = []

    init(seed: UInt64, limit: Int, prefix: String, exchange: String, connectionUser: String?, excluded: Set<String>) {
        random = SplitMix64(seed: seed)
        self.excluded = excluded
        self.limit = limit
        self.prefix = prefix
        self.exchange = exchange
        self.connectionUser = connectionUser
    }

    // MARK: Valid messages

    mutating func valid() -> FuzzMessage {
        plain(role: .valid, body: #"{"action":"refresh","message":"still valid"}"#)
    }

    mutating func probe() -> FuzzMessage {
        plain(role: .probe, body: #"{"action":"probe"}"#)
    }

    private mutating func plain(role: FuzzMessage.Role, body: String) -> FuzzMessage {
        seq += 1
        let id = "\(prefix).\(role).\(seq)"
        if role == .valid { earlierIDs.append(Array(id.utf8)) }
        let properties = AMQPMessageProperties(
            contentType: "application/json", headers: [Self.seqHeader: .int64(seq)], deliveryMode: .persistent,
            messageID: id)
        return FuzzMessage(
            seq: seq, role: role,
            outbound: AMQPOutboundMessage(
                exchange: exchange, routingKey: "wallet.notification", body: Array(body.utf8),
                properties: properties, mandatory: true),
            idBytes: Array(id.utf8), carriesSeq: true, bodyKind: "\(role)", traits: [])
    }

    // MARK: Hostile messages

    mutating func hostile() -> FuzzMessage {
        seq += 1
        var traits: [String] = []
        var properties = AMQPMessageProperties()
        var mayBeRefused = false
        let (bodyKind, generatedBody) = hostileBody(&properties, traits: &traits)
        var body = generatedBody

        let idBytes = messageID(&properties, traits: &traits)
        if chance(35) {
            shortString(
                &properties, .correlationID, \.correlationID, traits: &traits, numeric: true,
                utf8Only: excluded.contains("non-utf8-correlation-id"))
        }
        if chance(35) { replyTo(&properties, traits: &traits) }
        if properties.type == nil, chance(20) {
            shortString(&properties, .type, \.type, traits: &traits, numeric: false)
        }
        if chance(10) { shortString(&properties, .contentType, \.contentType, traits: &traits, numeric: false) }
        if chance(5) { shortString(&properties, .contentEncoding, \.contentEncoding, traits: &traits, numeric: false) }
        if chance(5) { shortString(&properties, .appID, \.appID, traits: &traits, numeric: false) }
        if chance(3) { shortString(&properties, .clusterID, \.clusterID, traits: &traits, numeric: false) }
        if chance(12) {
            properties.timestamp = pick([0, 1, UInt64.max, UInt64(Int64.max), UInt64(Int64.max) + 1, next()])
            traits.append("timestamp=\(properties.timestamp!)")
        }
        if chance(8) {
            properties.priority = UInt8.random(in: 0...255, using: &random)
            traits.append("priority=\(properties.priority!)")
        }
        properties.deliveryMode = pick([.persistent, .persistent, .transient, nil])
        if chance(8) {
            // RabbitMQ takes a whole number of milliseconds up to 2^32-1; "0" expires unless a consumer is ready.
            properties.expiration = pick(["0", "1", "5000", "60000", "4294967295", "\(int(0...4_294_967_295))"])
            traits.append("expiration=\(properties.expiration!)")
        }
        if chance(4), let connectionUser {
            properties.userID = connectionUser
            traits.append("user_id=\(connectionUser)")
        }
        // Refused on publish: the channel closes and is reopened (sent in a round of their own).
        if chance(1) {
            switch int(0...2) {
            case 0:
                properties.expiration = pick(["-1", "abc", "", "1.5", "99999999999999999999"])
                traits.append("refusable expiration=\(properties.expiration!.debugDescription)")
            case 1:
                properties.userID = "someone-else-\(int(0...999))"
                traits.append("refusable user_id=\(properties.userID!)")
            default:
                properties.headers = (properties.headers ?? [:])
                properties.headers!["CC"] = pick([.string("not-an-array"), .int32(7), .table(["a": .void])])
                traits.append("refusable CC header")
            }
            mayBeRefused = true
        }

        var headers = hostileHeaders(traits: &traits)
        // RabbitMQ 3.10 crashes a queue that expires a message with a malformed x-death (docs/contract-decisions.md,
        // Hostile input): the worker keeps such messages from the broker's dead-lettering, but cannot stop a TTL on
        // the work queue.
        if properties.expiration != nil {
            headers = headers.map { $0.0 == "x-death" ? ("x-death-forged", $0.1) : $0 }
        }
        // The test's own key: dead letters keep it. Left out now and then when the id alone identifies the message.
        let uniqueID = idBytes.map { id in !earlierIDs.contains(id) } ?? false
        let carriesSeq =
            !(uniqueID && idBytes.map { String(validating: $0, as: UTF8.self) != nil && !$0.isEmpty } == true
            && chance(30))
        if carriesSeq { headers.append((Self.seqHeader, .int64(seq))) }
        if let existing = properties.headers { headers = existing.entries + headers }
        properties.headers = headers.isEmpty ? nil : AMQPTable(headers)

        // The content header must fit the frame (the broker refuses bigger ones from publishers). A message the
        // broker may dead-letter itself (body over the limit, an expiration) keeps room for the `x-death` it adds:
        // RabbitMQ would deliver a content header over the frame size, which no librabbitmq consumer can read.
        let brokerMayDeadLetter = body.count > limit || properties.expiration != nil
        let room = AMQPConnectionConfiguration.defaultFrameMax - (brokerMayDeadLetter ? 4_096 : 0)
        var shrunk = 0
        while properties.encodingProblem(frameMax: room) != nil, var entries = properties.headers?.entries,
            let largest = entries.indices.filter({ entries[$0].key != Self.seqHeader })
                .max(by: { entries[$0].value.encodedByteCount < entries[$1].value.encodedByteCount })
        {
            entries.remove(at: largest)
            properties.headers = AMQPTable(entries)
            shrunk += 1
        }
        if shrunk > 0 { traits.append("(\(shrunk) headers left out to fit the frame)") }
        if let size = properties.contentHeaderSize, size > 16_384 { traits.append("content header \(size) bytes") }

        let routingKey = chance(10) ? hostileRoutingKey() : "wallet.notification"
        if routingKey != "wallet.notification" {
            traits.append("routing_key=\(routingKey.prefix(40).debugDescription)")
        }
        if body.count > 3 * limit { body = Array(body.prefix(3 * limit)) }
        if let idBytes { earlierIDs.append(idBytes) }
        return FuzzMessage(
            seq: seq, role: .hostile,
            outbound: AMQPOutboundMessage(
                exchange: exchange, routingKey: routingKey, body: body,
                properties: properties, mandatory: true),
            idBytes: idBytes, carriesSeq: carriesSeq, bodyKind: bodyKind, traits: traits, mayBeRefused: mayBeRefused)
    }

    // MARK: Bodies

    private mutating func hostileBody(_ properties: inout AMQPMessageProperties, traits: inout [String]) -> (
        String, [UInt8]
    ) {
        switch int(0...99) {
        case 0..<12:
            // Never a JSON object by chance (`{}` is one): the first byte is no `{` and no whitespace.
            var body = bytes(biasedLength(maximum: limit))
            if let first = body.first, [UInt8(ascii: "{"), 0x20, 0x09, 0x0A, 0x0D].contains(first) { body[0] = 0xFF }
            return ("random-bytes", body)
        case 12..<22:
            // Over the limit, up to three times it: up to twice it the worker reads the body and dead-letters it
            // itself; beyond that it is never read and the broker dead-letters it.
            let size = int((limit + 1)...(3 * limit))
            var body = chance(50) ? Array(#"{"action":"refresh","padding":""#.utf8) : bytes(16)
            body += [UInt8](repeating: UInt8(ascii: "x"), count: max(0, size - body.count - 2)) + Array(#""}"#.utf8)
            return ("over-limit", Array(body.prefix(size)))
        case 22..<26:
            // Exactly at the limit, or one byte over: valid JSON padded with spaces.
            let size = limit + int(0...1)
            let json = Array(#"{"action":"boundary"}"#.utf8)
            return ("boundary-\(size - limit)", json + [UInt8](repeating: UInt8(ascii: " "), count: size - json.count))
        case 26..<36:
            return ("cps", Array(cps().utf8))
        case 36..<44:
            return ("tns", Array(tns().utf8))
        case 44..<49:
            return (
                "mg",
                Array(
                    #"{"sender":\#(senderSpelling("MG")),"action":\#(pick([#""MG:ReplenishmentNeededNotification""#, #""mg:replenishmentneedednotification""#, "1", "null", jsonString(unicodeText(maximumScalars: 40))])),"digitalCardId":\#(cardID())}"#
                        .utf8)
            )
        case 49..<60:
            return ("action", Array(action().utf8))
        case 60..<66:
            properties.type = pick(["DeviceInstallation", "DeviceInstallationDeleted"])
            traits.append("type=\(properties.type!)")
            return ("installation", Array(installation().utf8))
        case 66..<72:
            return ("deep-nesting", deepJSON())
        case 72..<77:
            return (
                "huge-numbers",
                Array(
                    #"{"action":"numbers","values":[\#((0..<int(1...20)).map { _ in hugeNumber() }.joined(separator: ","))],"n":\#(hugeNumber())}"#
                        .utf8)
            )
        case 77..<83:
            return ("bad-json", badJSON())
        case 83..<87:
            return (
                "not-an-object",
                Array(pick(["[]", #""text""#, "1e999", "null", "true", "[{\"action\":\"x\"}]", "-0", " "]).utf8)
            )
        case 87..<90:
            return ("empty", [])
        case 90..<95:
            return ("unicode-keys", Array(unicodeKeys().utf8))
        default:
            return ("valid-action", Array(#"{"action":"\#(pick(["refresh", "sync", "a"]))"}"#.utf8))
        }
    }

    private mutating func senderSpelling(_ sender: String) -> String {
        pick([
            "\"\(sender)\"", "\"\(sender.lowercased())\"", "\" \(sender)\"", "\"\(sender)\\u0000\"", "null", "42",
            "[\"\(sender)\"]",
        ])
    }

    private mutating func cardID() -> String {
        pick([
            #""DC-1""#, #""DC-\#(int(0...20))""#, "null", #""""#, "7", "{}",
            jsonString(unicodeText(maximumScalars: 30)),
            jsonString(String(repeating: "C", count: int(200...3_000))), #""DC-\u0000""#, #""\ud800""#,
        ])
    }

    private mutating func cps() -> String {
        let code = pick([
            "CBP.info.tokenProvisioned", "CBP.info.tokenSuspended", "CBP.info.tokenResumed", "CBP.info.tokenDeleted",
            "CBP.info.tokenReplenished", "CBP.info.tokenRenewed", "CBP.info.tokenODACertRenewed", "CBP.error.pinLocked",
            "", "cbp.info.tokenprovisioned", unicodeText(maximumScalars: 20),
        ])
        func message(_ generator: inout HostileGenerator) -> String {
            let severity = generator.pick([#""info""#, #""ERROR""#, "null", "3", Self.jsonString("\u{0}")])
            let codeJSON = generator.chance(90) ? Self.jsonString(code) : generator.pick(["null", "1", "[]"])
            let text = Self.jsonString(generator.unicodeText(maximumScalars: 60))
            return
                #"{"code":\#(codeJSON),"text":\#(text),"severity":\#(severity),"params":\#(generator.randomJSON(depth: 4))}"#
        }
        let messages: String
        switch int(0...3) {
        case 0: messages = #""serverMessage":\#(message(&self))"#
        case 1:
            messages = #""serverMessages":[\#((0..<int(0...40)).map { _ in message(&self) }.joined(separator: ","))]"#
        case 2: messages = #""serverMessages":\#(pick(["[]", "{}", "\"x\"", "null", "[1,2]"]))"#
        default: messages = #""serverMessage":\#(message(&self)),"serverMessages":[\#(message(&self))]"#
        }
        return
            #"{"sender":\#(senderSpelling("CPS")),"digitalCardId":\#(cardID()),"tokenizedCardId":\#(pick(["null", #""TK""#, jsonString(unicodeText(maximumScalars: 10))])),"keyType":\#(pick([#""LUK""#, #""suk""#, "0"])),\#(messages)}"#
    }

    private mutating func tns() -> String {
        let transaction =
            #"{"id":\#(pick([#""T-\#(int(0...9))""#, "1", "null", jsonString(unicodeText(maximumScalars: 20))])),"date":\#(pick([#""2026-11-20T10:15:00Z""#, #""2026-02-30T25:61:61+99:99""#, #""9999999-01-01T00:00:00.123456789012345678Z""#, #""""#, "0"])),"status":\#(pick([#""approved""#, #""APPROVED""#, "null"])),"type":\#(pick([#""purchase""#, #""refund""#, #""other""#, "[]"])),"currencyCode":\#(pick([#""EUR""#, #""eur""#, #""€€€""#, "978"])),"amount":\#(hugeNumber()),"displayAmount":\#(jsonString(unicodeText(maximumScalars: 20))),"merchantName":\#(jsonString(unicodeText(maximumScalars: 80))),"isAuxiliaryTransaction":\#(pick(["false", "true", "1", "null"]))}"#
        let recordType = pick([
            "", #","transactionRecordType":"primary""#, #","transactionRecordType":"AUXILIARY""#,
            #","transactionRecordType":"""#, #","transactionRecordType":7"#,
        ])
        return
            #"{"sender":\#(senderSpelling("TNS")),"action":\#(pick([#""TNS:PaymentTransactionNotification""#, #""TNS:x""#, "null"])),"digitalCardId":\#(cardID())\#(recordType)\#(chance(70) ? #","transaction":\#(transaction)"# : "")}"#
    }

    private mutating func action() -> String {
        let action: String
        switch int(0...5) {
        case 0: action = jsonString(String(repeating: "a", count: int(195...205)))
        case 1: action = jsonString(unicodeText(maximumScalars: 80))
        case 2: action = #""act\u0000ion\n\"\\""#
        case 3: action = pick(["null", "\"\"", "0", "[]", "{}", "true"])
        case 4: action = jsonString(String(repeating: "é", count: int(99...101)))
        default: action = jsonString("do.\(int(0...99))")
        }
        let aps = pick([
            #"{"content-available":1}"#, #"{"content-available":1.0}"#, #"{"content-available":"1","alert":null}"#,
            #"{"alert":{"title":\#(jsonString(unicodeText(maximumScalars: 30))),"body":[1,{"x":null}]}}"#,
            #"{"content-available":1e400}"#, "null", "[]", "\"aps\"",
        ])
        return #"{"action":\#(action),"aps":\#(aps),"message":\#(randomJSON(depth: 3))}"#
    }

    private mutating func installation() -> String {
        let id = pick([
            jsonString("inst-\(int(0...50))"), jsonString(String(repeating: "i", count: int(250...260))), "null",
            "\"\"", "5",
            jsonString(unicodeText(maximumScalars: 260)),
        ])
        let platform = pick([#""apns""#, #""FCM""#, #""wns""#, "null", "1"])
        let token = pick([
            #""0a1B2c""#, #""abc""#, #""zz""#, "\"\"", jsonString(String(repeating: "ab", count: int(1...1_500))), "[]",
        ])
        let tags = pick([
            #"["user:42"]"#, "[]", "[1,2]", "\"tag\"",
            "[" + (0..<int(55...65)).map { "\"t\($0)\"" }.joined(separator: ",") + "]",
            "[" + jsonString(String(repeating: "t", count: int(118...122))) + "]", #"["bad tag!"]"#,
        ])
        return #"{"installationId":\#(id),"platform":\#(platform),"pushChannel":\#(token),"tags":\#(tags)}"#
    }

    private mutating func deepJSON() -> [UInt8] {
        // Around the parser's depth limit, and far beyond it (a recursive parser would exhaust its stack).
        let depth = chance(50) ? JSONParser.maximumDepth + int(-2...2) : int(200...1_900)
        let (open, close): (String, String) = chance(50) ? ("[", "]") : (#"{"a":"#, "}")
        let nested = String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)
        let body = chance(50) ? #"{"action":"deep","payload":\#(nested)}"# : nested
        return Array(body.utf8)
    }

    private mutating func hugeNumber() -> String {
        pick([
            "1e999", "-1e999", "1E-999999999999", "-0", "0.0000000000000000000000000000001",
            String(repeating: "9", count: int(20...3_000)), "123456789012345678901234567890.123456789e-400",
            "\(Int64.max)", "\(Int64.min)", "\(UInt64.max)", "18446744073709551616", "1.7976931348623157e309",
            "4.9e-325", "\(Double.random(in: -1e300...1e300, using: &random))",
        ])
    }

    private mutating func badJSON() -> [UInt8] {
        let valid = #"{"action":"refresh","message":"m"}"#
        switch int(0...9) {
        case 0: return Array(valid.utf8.dropLast(int(1...10)))
        case 1: return Array(#"{"action":NaN}"#.utf8)
        case 2: return Array(#"{"action":"x",}"#.utf8)
        case 3: return Array(#"{'action':'x'}"#.utf8)
        case 4: return [0xEF, 0xBB, 0xBF] + Array(valid.utf8)
        case 5: return Array(#"{"action":"a\#u{0}b"}"#.utf8)  // a raw NUL inside a string
        case 6: return Array(#"{"action":"\ud800"}"#.utf8)
        case 7: return Array(#"{"action":"x"}"#.utf8) + Array(" // trailing".utf8)
        case 8: return Array(#"{"action":""#.utf8) + [0xC0, 0xAF, 0xED, 0xA0, 0x80, 0xF8] + Array(#""}"#.utf8)
        default:
            // Duplicate and differently cased keys.
            return Array(
                #"{"sender":"CPS","SENDER":"TNS","Sender":"MG","action":"a","ACTION":null,"action":"b","digitalCardID":"DC-1","digitalCardId":null}"#
                    .utf8)
        }
    }

    private mutating func unicodeKeys() -> String {
        let members = (0..<int(1...30)).map { _ in
            "\(jsonString(unicodeText(maximumScalars: 12))):\(randomJSON(depth: 2))"
        }
        return "{" + (members + [#""action":\#(jsonString(unicodeText(maximumScalars: 20)))"#]).joined(separator: ",")
            + "}"
    }

    /// A random JSON value (valid JSON) of bounded depth.
    private mutating func randomJSON(depth: Int) -> String {
        switch int(0...(depth > 0 ? 7 : 5)) {
        case 0: return "null"
        case 1: return pick(["true", "false"])
        case 2: return hugeNumber()
        case 3, 4: return jsonString(unicodeText(maximumScalars: 24))
        case 5: return "\(int(-1_000...1_000))"
        case 6: return "[" + (0..<int(0...4)).map { _ in randomJSON(depth: depth - 1) }.joined(separator: ",") + "]"
        default:
            return "{"
                + (0..<int(0...4)).map { _ in
                    "\(jsonString(unicodeText(maximumScalars: 8))):\(randomJSON(depth: depth - 1))"
                }.joined(separator: ",") + "}"
        }
    }

    // MARK: Properties

    /// `message_id`: absent, empty, unique, 1-255 bytes, around the 240-byte limit, invalid UTF-8, a duplicate.
    private mutating func messageID(_ properties: inout AMQPMessageProperties, traits: inout [String]) -> [UInt8]? {
        let unique = Array("fz\(seq)-".utf8)
        let id: [UInt8]
        switch int(0...99) {
        case 0..<12:
            traits.append("message_id absent")
            return nil
        case 12..<17: id = []
        case 17..<40: id = unique + Array(asciiText(int(0...40)).utf8)
        case 40..<55: id = Array((unique + Array(asciiText(255).utf8)).prefix(int(1...255)))
        case 55..<62: id = Array((unique + Array(asciiText(255).utf8)).prefix(int(238...243)))
        case 62..<75: id = unique + invalidUTF8(int(1...(255 - unique.count)))
        case 75..<80: id = Array(unique + Array(unicodeText(maximumScalars: 60).utf8.prefix(255 - unique.count)))
        default:
            guard let earlier = earlierIDs.isEmpty ? nil : pick(earlierIDs) else {
                id = unique
                break
            }
            id = earlier
            traits.append("duplicate id")
        }
        // A short prefix ("f") can repeat an earlier id by chance: a replay all the same (CONTRACT.md §10).
        if !traits.contains("duplicate id"), earlierIDs.contains(id) { traits.append("duplicate id") }
        set(&properties, .messageID, \.messageID, id)
        traits.append("message_id=\(describe(id))")
        return id
    }

    /// A hostile short string: numeric-looking, random, empty, 255 bytes, invalid UTF-8.
    private mutating func shortString(
        _ properties: inout AMQPMessageProperties, _ field: AMQPMessageProperties.StringProperty,
        _ keyPath: WritableKeyPath<AMQPMessageProperties, String?>, traits: inout [String], numeric: Bool,
        utf8Only: Bool = false
    ) {
        let value: [UInt8]
        switch int(0...5) {
        case 3 where utf8Only: value = Array(asciiText(int(1...255)).utf8)
        case 0: value = Array(pick(["0", "-1", "abc", "", "1e309", "\(UInt64.max)"]).utf8)
        case 1: value = Array(asciiText(int(1...255)).utf8)
        case 2: value = Array(asciiText(255).utf8)
        case 3: value = invalidUTF8(int(1...255))
        case 4: value = Array(unicodeText(maximumScalars: 60).utf8.prefix(255))
        default:
            value =
                numeric
                ? Array("\(next())".utf8)
                : Array(pick(["DeviceInstallation", "deviceinstallation", "rejected", "application/json"]).utf8)
        }
        set(&properties, field, keyPath, value)
        traits.append("\(field)=\(describe(value))")
    }

    /// `reply_to`: malformed direct reply-to addresses, one of an unknown node, random strings, 255 bytes.
    private mutating func replyTo(_ properties: inout AMQPMessageProperties, traits: inout [String]) {
        let prefix = "amq.rabbitmq.reply-to."
        let value: [UInt8]
        switch int(0...7) {
        case 0: value = Array("\(prefix)g2gCZA==.AAAAAA==".utf8)
        case 1:
            value = Array(
                (prefix + Data(bytes(int(1...60))).base64EncodedString() + "." + Data(bytes(16)).base64EncodedString())
                    .utf8.prefix(255))
        case 2:
            // A well-formed pid (NEW_PID_EXT) of a node the broker does not know: RabbitMQ closes the publisher (541).
            let node = Array("reply\(int(0...999))@host\(int(0...999))".utf8)
            let term: [UInt8] = [131, 88, 118, 0, UInt8(node.count)] + node + bytes(12)
            value = Array("\(prefix)\(Data(term).base64EncodedString()).\(Data(bytes(16)).base64EncodedString())".utf8)
        case 3: value = Array("\(prefix)\(asciiText(int(0...40)))".utf8.prefix(255))
        case 4: value = Array(asciiText(255).utf8)
        case 5 where excluded.contains("non-utf8-reply-to"): value = Array(asciiText(int(1...255)).utf8)
        case 5: value = invalidUTF8(int(1...255))
        case 6:
            value = Array(
                pick(["", "amq.gen-nonexistent", "amq.rabbitmq.reply-to.", "amq.rabbitmq.reply-to..", "."]).utf8)
        default: value = Array(asciiText(int(1...40)).utf8)
        }
        set(&properties, .replyTo, \.replyTo, value)
        traits.append("reply_to=\(describe(value))")
    }

    private func set(
        _ properties: inout AMQPMessageProperties, _ field: AMQPMessageProperties.StringProperty,
        _ keyPath: WritableKeyPath<AMQPMessageProperties, String?>, _ bytes: [UInt8]
    ) {
        properties[keyPath: keyPath] = String(decoding: bytes, as: UTF8.self)
        if String(validating: bytes, as: UTF8.self) == nil { properties.undecodedStrings[field] = bytes }
    }

    private mutating func hostileRoutingKey() -> String {
        pick([
            "", "#", "*.*", ".", "..", "a.b.c.d.e.f.g.h", asciiText(int(1...255)), String(repeating: "a.", count: 127),
        ])
    }

    // MARK: Headers

    /// Headers of every field type, nested several levels, an empty key, big ones, and the headers the worker and
    /// the broker read (`x-retry-count`, `traceparent`, `x-death`, ...) with extreme values and wrong types.
    private mutating func hostileHeaders(traits: inout [String]) -> [(String, AMQPFieldValue)] {
        var headers: [(String, AMQPFieldValue)] = []
        if chance(55) {
            var budget = 400
            for _ in 0..<int(1...10) { headers.append((headerKey(), fieldValue(depth: int(0...5), budget: &budget))) }
            traits.append("\(headers.count) random headers")
        }
        if chance(10) {
            var budget = 50
            headers.append(("", fieldValue(depth: 2, budget: &budget)))
            traits.append("empty header key")
        }
        if chance(12) {
            let value: AMQPFieldValue = pick([
                .int64(.max), .int64(.min), .int64(-1), .uint64(.max), .int32(.min), .int32(.max), .int8(-128),
                .uint8(255), .string("3"), .string(""), .bytes([0xFF]), .double(-.greatestFiniteMagnitude),
                .float(-0.0),
                .decimal(scale: 255, value: .max), .table(["x-retry-count": .int64(1)]), .array([.int64(.max)]),
                .void, .bool(true), .timestamp(.max),
            ])
            headers.append(("x-retry-count", value))
            traits.append("x-retry-count=\(value)")
        }
        if chance(15) {
            let value: AMQPFieldValue
            switch int(0...6) {
            case 0: value = .string("00-\(hex(32))-\(hex(16))-01")
            case 1: value = .string(String(repeating: "t", count: int(510...514)))
            case 2: value = .string(String(repeating: "t", count: int(10_000...127_000)))
            case 3: value = .bytes(invalidUTF8(int(1...100)))
            case 4: value = pick([.int64(.min), .table(["traceparent": .string("x")]), .array([]), .void, .string("")])
            case 5: value = .string(unicodeText(maximumScalars: 100))
            default: value = .string(asciiText(int(1...600)))
            }
            headers.append(("traceparent", value))
            traits.append("traceparent (\(value.encodedByteCount) bytes)")
        }
        if chance(8) {
            // A big header: anywhere up to the frame (shrunk to fit below).
            let size = chance(50) ? int(1_000...30_000) : int(100_000...131_000)
            let value: AMQPFieldValue = chance(50) ? .string(String(repeating: "h", count: size)) : .bytes(bytes(size))
            headers.append((chance(50) ? "big" : "", value))
            traits.append("big header (\(size) bytes)")
        }
        if chance(6) {
            headers.append(("deep", deepFieldValue(depth: int(10...400))))
            traits.append("deeply nested header")
        }
        if chance(4) {
            // Headers the broker and the worker write themselves, forged.
            let key = pick([
                excluded.contains("forged-x-death") ? "x-first-death-queue" : "x-death", "x-worker-error",
                "x-worker-dropped-headers", "x-original-expiration",
                "x-first-death-reason", "x-worker-last-error", "x-original-user-id",
            ])
            let value: AMQPFieldValue = pick([
                .string("forged"), .array([.string("x")]), .array([]), .int64(-1), .bytes([0xFF, 0xFE]),
                .array([.table(["queue": .string("elsewhere"), "reason": .string("rejected"), "count": .int64(.max)])]),
            ])
            headers.append((key, value))
            traits.append("forged \(key)=\(value)")
        }
        if chance(3) {
            // Duplicate keys in one table (the broker keeps them as sent).
            headers.append(("dup", .int32(1)))
            headers.append(("dup", .string("two")))
            traits.append("duplicate header keys")
        }
        return headers
    }

    private mutating func headerKey() -> String {
        switch int(0...9) {
        case 0: return ""
        case 1: return String(asciiText(255).prefix(255))
        case 2: return String(decoding: Array(unicodeText(maximumScalars: 40).utf8.prefix(120)), as: UTF8.self)
        // Not `CC` or `BCC`: RabbitMQ routes by them and refuses any that is not an array of strings.
        case 3: return pick(["x-retry-count", "traceparent", "x-death", "x-fuzz-seq"]).uppercased()
        default: return "h\(int(0...99))-" + asciiText(int(0...12))
        }
    }

    /// A value of any AMQP field type; arrays and tables nest down to `depth`.
    private mutating func fieldValue(depth: Int, budget: inout Int) -> AMQPFieldValue {
        budget -= 1
        let nests = depth > 0 && budget > 0
        switch int(0...(nests ? 18 : 16)) {
        case 0: return .bool(chance(50))
        case 1: return .int8(pick([.min, .max, 0, -1, Int8(truncatingIfNeeded: next())]))
        case 2: return .uint8(pick([.min, .max, UInt8(truncatingIfNeeded: next())]))
        case 3: return .int16(pick([.min, .max, -1, Int16(truncatingIfNeeded: next())]))
        case 4: return .uint16(pick([.min, .max, UInt16(truncatingIfNeeded: next())]))
        case 5: return .int32(pick([.min, .max, -1, Int32(truncatingIfNeeded: next())]))
        case 6: return .uint32(pick([.min, .max, UInt32(truncatingIfNeeded: next())]))
        case 7: return .int64(pick([.min, .max, -1, Int64(bitPattern: next())]))
        case 8: return .uint64(pick([.min, .max, next()]))
        // No NaN or infinity: Erlang has neither, and RabbitMQ closes the publishing connection (541) on them.
        case 9:
            let value = pick([
                -0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                Float(bitPattern: UInt32(truncatingIfNeeded: next())),
            ])
            return .float(value.isFinite ? value : 1.5)
        case 10:
            let value = pick([
                -0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
                Double(bitPattern: next()),
            ])
            return .double(value.isFinite ? value : 1.5)
        case 11:
            return .decimal(
                scale: pick([0, 2, 255, UInt8(truncatingIfNeeded: next())]),
                value: pick([0, .max, UInt32(truncatingIfNeeded: next())]))
        case 12: return .string(chance(50) ? unicodeText(maximumScalars: 40) : asciiText(int(0...300)))
        case 13: return .bytes(bytes(int(0...300)))
        case 14: return .timestamp(pick([0, .max, UInt64(Int64.max), next()]))
        case 15: return .void
        case 16: return .string("")
        case 17: return .array((0..<int(0...6)).map { _ in fieldValue(depth: depth - 1, budget: &budget) })
        default:
            return .table(
                AMQPTable(
                    (0..<int(0...6)).map { _ in (key: headerKey(), value: fieldValue(depth: depth - 1, budget: &budget))
                    }))
        }
    }

    /// Tables and arrays nested `depth` levels.
    private mutating func deepFieldValue(depth: Int) -> AMQPFieldValue {
        var value: AMQPFieldValue = .string("bottom")
        for level in 0..<depth {
            value =
                chance(50)
                ? .array([value, .int8(Int8(truncatingIfNeeded: level))]) : .table([level % 7 == 0 ? "" : "n": value])
        }
        return value
    }

    // MARK: Random material

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
    private mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    private mutating func next() -> UInt64 { random.next() }
    private mutating func pick<T>(_ options: [T]) -> T { options[int(0...(options.count - 1))] }
    private mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    /// Mostly short, sometimes up to `maximum`.
    private mutating func biasedLength(maximum: Int) -> Int {
        chance(70) ? int(0...min(64, maximum)) : int(0...maximum)
    }

    private mutating func asciiText(_ count: Int) -> String {
        String(decoding: (0..<count).map { _ in UInt8(int(0x20...0x7E)) }, as: UTF8.self)
    }

    private mutating func hex(_ count: Int) -> String {
        String((0..<count).map { _ in "0123456789abcdef".randomElement(using: &random)! })
    }

    /// Bytes that are not UTF-8 (at least one invalid byte), byte-exact for uniqueness.
    private mutating func invalidUTF8(_ count: Int) -> [UInt8] {
        var value = bytes(max(count, 1))
        value[int(0...(value.count - 1))] = pick([0xFF, 0xFE, 0xC0, 0x80, 0xF8])
        return value
    }

    /// Scalars that tend to break things: NUL and controls, combining marks, bidi controls, noncharacters,
    /// astral characters, the replacement character, and plain letters.
    private mutating func unicodeText(maximumScalars: Int) -> String {
        let pool: [Unicode.Scalar] = [
            "\u{0}", "\u{1}", "\u{1F}", "\u{7F}", "\u{85}", "\u{A0}", "\u{AD}", "\u{300}", "\u{200B}", "\u{200D}",
            "\u{202E}", "\u{2028}", "\u{2029}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}", "\u{10FFFF}", "\u{1F600}",
            "\u{1F469}", "é", "ß", "İ", "ı", "ǅ", "\"", "\\", "/", ".", "#", "*", "a", "Z", "0", " ", "ö", "中",
            "\u{E000}",
        ]
        var text = String.UnicodeScalarView()
        for _ in 0..<int(0...maximumScalars) { text.append(pick(pool)) }
        return String(text)
    }

    /// A JSON string literal of `text`, escaped (controls as `\u00XX`).
    private func jsonString(_ text: String) -> String { Self.jsonString(text) }

    private static func jsonString(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case _ where scalar.value < 0x20: output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    private func describe(_ bytes: [UInt8]) -> String {
        let text = String(validating: bytes, as: UTF8.self)
        let shown = text.map { String($0.prefix(40)).debugDescription } ?? "<\(bytes.count) bytes, not UTF-8>"
        return bytes.count > 40 ? "\(shown)…(\(bytes.count) bytes)" : shown
    }
}

extension AMQPMessageProperties {
    /// The smallest frame the content header fits, nil when a short string is over 255 bytes.
    fileprivate var contentHeaderSize: Int? {
        var low = 0
        var high = 1 << 24
        guard encodingProblem(frameMax: high) == nil else { return nil }
        while low < high {
            let middle = (low + high) / 2
            if encodingProblem(frameMax: middle) == nil { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

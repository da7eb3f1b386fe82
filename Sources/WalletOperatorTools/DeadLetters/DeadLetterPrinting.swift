import AMQPTransport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A table on a terminal, JSON lines otherwise or with `--json`.
public struct DeadLetterPrinter {
    var json: Bool
    let now = Date()
    var headerPrinted = false

    public init(json: Bool) {
        self.json = json || isatty(STDOUT_FILENO) == 0
    }

    public mutating func print(_ letter: DeadLetter) throws -> Bool {
        if json { return try printLine(letter.jsonLine(at: now)) }
        if !headerPrinted {
            headerPrinted = true
            guard try printLine(Self.row("AGE", "BY", "SENDER", "MESSAGE ID", "REASON")) else { return false }
        }
        let age = letter.age(at: now).map(Self.age) ?? "?"
        var reason = letter.reason
        if let hint = letter.hint { reason += " (\(hint))" }
        if !letter.missing.isEmpty { reason += " [truncated: lacks \(letter.missing.joined(separator: "; "))]" }
        return try printLine(
            Self.row(
                age, letter.deadLetteredBy, letter.sender ?? "-", letter.messageID ?? "-", reason))
    }

    public static func row(_ age: String, _ by: String, _ sender: String, _ id: String, _ reason: String) -> String {
        func cell(_ text: String, _ width: Int) -> String {
            let cut = text.count > width ? String(text.prefix(width - 1)) + "…" : text
            return cut.padding(toLength: width, withPad: " ", startingAt: 0)
        }
        return "\(cell(age, 8)) \(cell(by, 7)) \(cell(sender, 7)) \(cell(id, 36)) \(reason.prefix(240))"
    }

    public static func age(_ seconds: TimeInterval) -> String {
        switch seconds {
        case ..<120: "\(Int(seconds))s"
        case ..<7_200: "\(Int(seconds / 60))m"
        case ..<172_800: "\(Int(seconds / 3_600))h"
        default: "\(Int(seconds / 86_400))d"
        }
    }
}

/// `show`'s JSON: the message whole; a body that is not UTF-8 in base64. A device installation's push channel (a
/// push token) is masked unless asked, as `inspect installation` does.
public enum DeadLetterDetail {
    public static func jsonLine(
        _ message: DeadLetterMessage, exchange: String? = nil, showPushChannel: Bool = false
    ) -> String {
        var object: [String: Any] = ["routingKey": message.routingKey]
        object["exchange"] = exchange
        let properties = message.properties
        var described: [String: Any] = [:]
        described["messageId"] = properties.messageID
        described["correlationId"] = properties.correlationID
        described["type"] = properties.type
        described["replyTo"] = properties.replyTo
        described["contentType"] = properties.contentType
        described["expiration"] = properties.expiration
        described["timestamp"] = properties.timestamp
        described["appId"] = properties.appID
        described["userId"] = properties.userID
        object["properties"] = described
        if let headers = properties.headers {
            object["headers"] = Dictionary(
                headers.entries.map { ($0.key, json($0.value)) }, uniquingKeysWith: { first, _ in first })
        }
        if let size = message.withheldBodySize {
            object["bodyNotRead"] = "\(size) bytes, over the tool's read limit (twice --max-body-bytes)"
        } else {
            let body = showPushChannel ? message.body : PushChannelMask.masked(message.body)
            if let text = String(validating: body, as: UTF8.self) {
                object["body"] = text
            } else {
                object["bodyBase64"] = Data(body).base64EncodedString()
            }
        }
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// A header value as text, for messages.
    static func text(_ value: AMQPFieldValue) -> String {
        switch json(value) {
        case let text as String: text
        case let number as Int: String(number)
        default: "\(value)"
        }
    }

    static func json(_ value: AMQPFieldValue) -> Any {
        switch value {
        case .bool(let value): value
        case .int8(let value): Int(value)
        case .uint8(let value): Int(value)
        case .int16(let value): Int(value)
        case .uint16(let value): Int(value)
        case .int32(let value): Int(value)
        case .uint32(let value): Int(value)
        case .int64(let value): Int(value)
        case .uint64(let value): value <= UInt64(Int.max) ? Int(value) : "\(value)"
        case .float(let value): value.isFinite ? Double(value) : "\(value)"
        case .double(let value): value.isFinite ? value : "\(value)"
        case .decimal(let scale, let value): "\(value)e-\(scale)"
        case .string(let value): value
        case .bytes(let bytes), .undecodedString(let bytes):
            String(validating: bytes, as: UTF8.self) ?? Data(bytes).base64EncodedString()
        case .timestamp(let seconds): Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(.iso8601)
        case .array(let values): values.map(json)
        case .table(let table):
            Dictionary(table.entries.map { ($0.key, json($0.value)) }, uniquingKeysWith: { first, _ in first })
        case .void: NSNull()
        }
    }
}

import Foundation
import WalletRouting
import WalletStore

/// `wallet-worker route`: the routing core and the store without a broker. Each input line is one inbound message,
/// `{"properties": {"messageId", "correlationId", "replyTo", "type", "timestamp", "traceparent"}, "body": <JSON>}`
/// (or `"bodyText"` for a raw string, `"bodyBase64"` for raw bytes); each output line is what the worker would do
/// with it: `{"line", "disposition", "reason", "outcome", "replay", "results": [{"exchange", "routingKey",
/// "properties", "body"}]}`. The format is the golden corpus's step format, so a corpus step can be pasted in.
public struct RouteLines: Sendable {
    public var store: any WalletStore
    public var router: NotificationRouter
    /// The processing time; nil means the clock at each line.
    public var now: Date?
    /// Keep each line's effects in the store (`route --commit`, or the private memory store); otherwise every line
    /// is a dry run against the store as it is, and later lines do not see earlier ones' effects.
    public var commits: Bool

    public init(store: any WalletStore, router: NotificationRouter, now: Date? = nil, commits: Bool = true) {
        self.store = store
        self.router = router
        self.now = now
        self.commits = commits
    }

    /// An input line that is not a message: said on its output line, and the command exits non-zero.
    public struct InputError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Routes one input line; returns the output line (without its newline), and whether it failed: the line is
    /// not a message, or (`storeFailed`) the store could not route it.
    public func route(line: [UInt8], number: Int) async -> (output: [UInt8], failed: Bool, storeFailed: Bool) {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("line")
        writer.int(number)
        let failed: Bool
        var storeFailed = false
        do {
            let message = try Self.message(from: line)
            let stored =
                commits
                ? try await store.process([message], router: router, now: now ?? Date())[0]
                : try await store.dryRun([message], router: router, now: now ?? Date())[0]
            Self.write(stored, into: &writer)
            failed = false
        } catch {
            writer.key("error")
            writer.string("\(error)")
            failed = true
            storeFailed = error is StoreError
        }
        writer.endObject()
        return (writer.takeBytes(), failed, storeFailed)
    }

    /// Reads an input line in the golden corpus's step format.
    public static func message(from line: [UInt8]) throws -> InboundMessage {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            throw InputError(
                description: "the line is not JSON (\(error)); expected {\"properties\": {...}, \"body\": {...}}")
        }
        guard let object = value.objectValue else {
            throw InputError(
                description: "the line is not a JSON object; expected {\"properties\": {...}, \"body\": {...}}")
        }
        var body: [UInt8]
        if let raw = object["body"] {
            var writer = JSONWriter()
            writer.value(raw)
            body = writer.takeBytes()
        } else if let text = object["bodyText"]?.stringValue {
            body = Array(text.utf8)
        } else if let encoded = object["bodyBase64"]?.stringValue {
            guard let data = Data(base64Encoded: encoded) else {
                throw InputError(description: "`bodyBase64` is not base64")
            }
            body = Array(data)
        } else {
            throw InputError(description: "the line has no `body`, `bodyText` or `bodyBase64`")
        }
        if let pad = object["padWithSpacesTo"]?.numberValue?.intValue, pad > body.count {
            body.append(contentsOf: repeatElement(UInt8(ascii: " "), count: pad - body.count))
        }
        var properties = InboundProperties()
        if let given = object["properties"]?.objectValue {
            properties.messageID = given["messageId"]?.stringValue
            properties.correlationID = given["correlationId"]?.stringValue
            properties.replyTo = given["replyTo"]?.stringValue
            properties.type = given["type"]?.stringValue
            properties.timestamp = given["timestamp"]?.numberValue?.intValue.map(Int64.init)
            properties.traceparent = given["traceparent"]?.stringValue
        }
        return InboundMessage(body: body, properties: properties)
    }

    private static func write(_ stored: StoredDecision, into writer: inout JSONWriter) {
        let decision = stored.decision
        writer.key("disposition")
        switch decision.disposition {
        case .acknowledge:
            writer.string("acknowledge")
        case .deadLetter(let reason):
            writer.string("deadLetter")
            writer.key("reason")
            writer.string(reason)
        }
        writer.key("outcome")
        writer.string(decision.outcome.rawValue)
        writer.key("replay")
        writer.bool(stored.isReplay)
        writer.key("results")
        writer.beginArray()
        for result in decision.results {
            writer.result(result)
        }
        writer.endArray()
    }
}

extension JSONWriter {
    /// A result as `route` prints it and `inspect message` shows a recorded one: exchange, routing key,
    /// properties, and the body as the JSON it is.
    mutating func result(_ result: OutboundResult) {
        beginObject()
        key("exchange")
        string(result.exchange)
        key("routingKey")
        string(result.routingKey)
        key("properties")
        beginObject()
        key("messageId")
        string(result.properties.messageID)
        key("correlationId")
        string(result.properties.correlationID)
        key("type")
        string(result.properties.type)
        key("traceparent")
        string(result.properties.traceparent)
        endObject()
        key("body")
        raw(result.body)
        endObject()
    }
}

import Foundation
import Testing

@testable import WalletRouting

/// 2026-11-20T10:15:00Z.
let testNow = Date(timeIntervalSince1970: 1_795_169_700)

/// A router over an in-memory state: sends messages and applies their effects, as the worker would.
struct Wallet {
    var state = InMemoryWalletState()
    var router = NotificationRouter()
    var now = testNow

    init(settings: RoutingSettings = RoutingSettings()) {
        router = NotificationRouter(settings: settings)
    }

    /// Routes one message and applies its effects.
    @discardableResult
    mutating func send(
        _ json: String, type: String? = nil, messageID: String? = "m-1", correlationID: String? = nil,
        replyTo: String? = nil, traceparent: String? = nil
    ) throws -> Decision {
        try send(
            bytes: Array(json.utf8), type: type, messageID: messageID, correlationID: correlationID,
            replyTo: replyTo, traceparent: traceparent)
    }

    @discardableResult
    mutating func send(
        bytes: [UInt8], type: String? = nil, messageID: String? = "m-1", correlationID: String? = nil,
        replyTo: String? = nil, traceparent: String? = nil
    ) throws -> Decision {
        let properties = InboundProperties(
            messageID: messageID, correlationID: correlationID, replyTo: replyTo, type: type, traceparent: traceparent
        )
        let decision = try router.route(InboundMessage(body: bytes, properties: properties), state: state, now: now)
        state.apply(decision.effects)
        return decision
    }

    /// Puts a card in the state directly.
    mutating func seed(
        _ digitalCardId: String, _ state: CardState?, tokenizedCardId: String? = nil, keyType: KeyType = .suk
    ) {
        guard let state else { return }
        self.state.apply([
            .upsertCard(
                CardRecord(
                    digitalCardId: digitalCardId, state: state, tokenizedCardId: tokenizedCardId, keyType: keyType))
        ])
    }
}

extension OutboundResult {
    /// The body parsed back (every result body must be a JSON object).
    var json: JSONObject {
        get throws {
            let value = try JSONParser.parse(body)
            return try #require(value.objectValue)
        }
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

extension Decision {
    /// The primary results (not the reply_to copies).
    var primaries: [OutboundResult] { results.filter { $0.exchange != "" } }

    /// The parsed bodies of the primary results.
    var bodies: [JSONObject] {
        get throws { try primaries.map { try $0.json } }
    }

    /// The `reason` of the single rejected result.
    var rejectionReason: String? {
        guard results.count >= 1, let body = try? results[0].json, body["kind"] == .string("rejected") else {
            return nil
        }
        return body["reason"]?.stringValue
    }
}

extension JSONObject {
    func string(_ key: String) -> String? { self[key]?.stringValue }
    func object(_ key: String) -> JSONObject? { self[key]?.objectValue }
    func bool(_ key: String) -> Bool? { self[key]?.boolValue }
    func isNull(_ key: String) -> Bool { self[key]?.isNull ?? false }
    var keys: [String] { members.map(\.key) }
}

extension JSONValue {
    init(json: String) throws {
        self = try JSONParser.parse(Array(json.utf8))
    }
}

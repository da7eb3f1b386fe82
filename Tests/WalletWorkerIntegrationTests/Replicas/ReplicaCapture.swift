import BrokerTestSupport
import Foundation

// The multi-replica tests' view of what the capture queue received, and when the SIGKILL happened.

/// One copy of a result as the capture queue received it.
struct CapturedCopy: Sendable {
    var messageID: String?
    var exchange: String
    var routingKey: String
    var body: [UInt8]

    init(_ message: CapturedMessage) {
        messageID = message.properties.messageID
        exchange = message.exchange
        routingKey = message.routingKey
        body = message.body
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// `processedAt` as seconds since the epoch.
    var processedAt: Double? {
        guard let text = json["processedAt"] as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}

/// The captured results grouped by result id (`<inbound message_id>/<n>`), in order of first arrival.
struct ReplicaCapture: Sendable {
    var copies: [String: [CapturedCopy]] = [:]
    var firstArrival: [String] = []
    var withoutID = 0
    /// Distinct result indices by inbound id.
    var indicesByInbound: [String: Set<Int>] = [:]

    init(_ all: [CapturedCopy]) {
        for copy in all {
            guard let id = copy.messageID else {
                withoutID += 1
                continue
            }
            if copies[id] == nil {
                firstArrival.append(id)
                if let (inbound, index) = Self.split(id) { indicesByInbound[inbound, default: []].insert(index) }
            }
            copies[id, default: []].append(copy)
        }
    }

    static func split(_ resultID: String) -> (inbound: String, index: Int)? {
        guard let slash = resultID.lastIndex(of: "/"), let index = Int(resultID[resultID.index(after: slash)...]) else {
            return nil
        }
        return (String(resultID[..<slash]), index)
    }

    func first(_ id: String) -> CapturedCopy? { copies[id]?.first }

    /// The inbound message's results (first copies), by index.
    func results(of inbound: String) -> [CapturedCopy] {
        (indicesByInbound[inbound] ?? []).sorted().compactMap { first("\(inbound)/\($0)") }
    }

    /// Result copies beyond the first.
    var repeatedCopies: Int { copies.values.reduce(0) { $0 + $1.count - 1 } }
}

/// When the SIGKILL happened, for telling a redelivery it caused from a message processed twice for no reason.
struct KillInstant: Sendable {
    var time: Double
    /// A processing of the killed replica started at most this long before the kill (a batch, lock waits included).
    static let batchWindow = 30.0

    /// Two processings of one message, the first by the killed replica and the second after the kill.
    func explains(_ processedAt: [Double]) -> Bool {
        guard processedAt.count == 2 else { return processedAt.count < 2 }
        let sorted = processedAt.sorted()
        return sorted[0] <= time + 0.001 && sorted[0] >= time - Self.batchWindow && sorted[1] >= time - 0.001
    }
}

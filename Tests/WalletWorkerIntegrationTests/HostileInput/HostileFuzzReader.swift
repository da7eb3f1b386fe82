// Reading back what the hostile-input fuzzing run (HostileFuzzChecks.swift) caused: the small records it keeps of the
// worker's results and of the dead letters, which BrokerTestSupport's `QueueCapture` collects.
import AMQPTransport
import WalletRouting

/// What the test keeps of a result: enough to attribute it to a round and to explain it.
struct FuzzResult: Sendable, CustomStringConvertible {
    var messageID: String?
    var correlationID: String?
    var kind: String?
    var reason: String?
    var arrived: ContinuousClock.Instant

    init(_ delivery: AMQPDelivery) {
        messageID = delivery.properties.messageID
        correlationID = delivery.properties.correlationID
        kind = delivery.properties.type
        if kind == "rejected" {
            reason = (try? JSONParser.parse(delivery.body))?.objectValue?["reason"]?.stringValue
        }
        arrived = .now
    }

    var description: String { "[\(kind ?? "nil") id=\(messageID ?? "nil")\(reason.map { " reason=\($0)" } ?? "")]" }
}

/// What the test keeps of a dead letter.
struct FuzzDeadLetter: Sendable, CustomStringConvertible {
    var seq: Int64?
    var messageID: [UInt8]?
    var workerError: String?
    /// The reason of the `x-death` entry for the work queue: the broker dead-lettered it (rejected or expired).
    var brokerReason: String?
    var droppedHeaders: String?

    init(_ delivery: AMQPDelivery, workQueue: String) {
        let headers = delivery.properties.headers
        if case .int64(let value)? = headers?[HostileGenerator.seqHeader] { seq = value }
        messageID =
            delivery.properties.undecodedStrings[.messageID] ?? delivery.properties.messageID.map { Array($0.utf8) }
        workerError = headers?["x-worker-error"].flatMap(\.fuzzText)
        droppedHeaders = headers?["x-worker-dropped-headers"].flatMap(\.fuzzText)
        if case .array(let deaths)? = headers?["x-death"] {
            for case .table(let death) in deaths where death["queue"]?.fuzzText == workQueue {
                brokerReason = death["reason"]?.fuzzText
                break
            }
        }
    }

    var description: String {
        "[seq=\(seq.map(String.init) ?? "nil") x-worker-error=\(workerError.map { String($0.prefix(120)) } ?? "nil") x-death=\(brokerReason ?? "nil")]"
    }
}

extension AMQPFieldValue {
    fileprivate var fuzzText: String? {
        switch self {
        case .string(let text): text
        case .bytes(let bytes): String(decoding: bytes, as: UTF8.self)
        default: nil
        }
    }
}

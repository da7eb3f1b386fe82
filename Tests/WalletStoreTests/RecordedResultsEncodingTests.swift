import Testing
import WalletRouting

@testable import WalletStore

@Suite struct RecordedResultsEncodingTests {
    private static func result(
        exchange: String = "wallet.events", body: String = #"{"kind":"cardEvent"}"#, messageID: String? = "m/0",
        correlationID: String? = "c", traceparent: String? = nil
    ) -> OutboundResult {
        OutboundResult(
            exchange: exchange, routingKey: "card.suspended", body: Array(body.utf8),
            properties: OutboundProperties(
                messageID: messageID, correlationID: correlationID, type: "cardEvent", traceparent: traceparent))
    }

    private static func decode(_ bytes: [UInt8]) throws -> [OutboundResult] {
        try bytes.withUnsafeBytes { try RecordedResultsEncoding.decode($0) }
    }

    @Test func resultsRoundTripExactlyAndInOrder() throws {
        let results = [
            Self.result(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            // A reply_to copy: the default exchange's empty name, absent optionals, an empty body.
            Self.result(exchange: "", body: "", messageID: nil, correlationID: nil),
            // Non-ASCII text and a body longer than one LEB128 byte can count.
            Self.result(body: #"{"text":"Carte suspendue — ré-essayez"}"# + String(repeating: " ", count: 300)),
        ]
        #expect(try Self.decode(RecordedResultsEncoding.encode(results)) == results)
        #expect(try Self.decode(RecordedResultsEncoding.encode([])) == [])
    }

    @Test func blobsThisBuildDidNotWriteAreRefusedNotMisread() throws {
        let bytes = RecordedResultsEncoding.encode([Self.result()])
        for broken in [[], Array(bytes.dropLast()), bytes + [0], [2] + bytes.dropFirst()] {
            let error = #expect(throws: StoreError.self) { try Self.decode(broken) }
            #expect(error?.kind == .permanent)
        }
    }
}

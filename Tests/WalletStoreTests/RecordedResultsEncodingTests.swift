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
        for compressing in [false, true] {
            #expect(try Self.decode(RecordedResultsEncoding.encode(results, compressing: compressing)) == results)
            #expect(try Self.decode(RecordedResultsEncoding.encode([], compressing: compressing)) == [])
        }
        #expect(
            RecordedResultsEncoding.encode(results, compressing: false).first == RecordedResultsEncoding.uncompressed)
        #expect(RecordedResultsEncoding.encode(results, compressing: true).first == RecordedResultsEncoding.compressed)
    }

    /// A writer kept for a whole batch (as the stores keep one): each message's value reads back as its own results,
    /// through a value larger than the writer's first buffers and back to small ones.
    @Test func aWriterKeptForABatchWritesEachMessageOnItsOwn() throws {
        let messages: [[OutboundResult]] = [
            [Self.result()], [], [Self.result(body: String(repeating: "x", count: 9_000)), Self.result()],
            [Self.result(exchange: "", messageID: nil)], [Self.result(), Self.result(), Self.result()],
        ]
        for compressing in [false, true] {
            let writer = RecordedResultsWriter(compressing: compressing)
            for results in messages + messages {
                let value = writer.withValue(of: results) { Array($0) }
                #expect(try Self.decode(value) == results)
                #expect(value == RecordedResultsEncoding.encode(results, compressing: compressing))
            }
        }
    }

    @Test func compressedResultsTakeAFractionOfTheBytes() {
        let history = (1...10).map {
            #"{"id":"T-\#($0)","date":"2026-11-\#(10 + $0)T10:00:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":\#($0).50,"merchantName":"Shop \#($0)","isAuxiliaryTransaction":false}"#
        }
        let body =
            #"{"kind":"transactionRecords","messageId":"m-1","correlationId":"m-1","sender":"TNS","processedAt":"2026-11-30T08:00:00.000Z","digitalCardId":"c-1","transactionRecordType":null,"records":["#
            + history.joined(separator: ",") + "]}"
        let results = [
            OutboundResult(
                exchange: "wallet.transactions", routingKey: "transactions.records", body: Array(body.utf8),
                properties: OutboundProperties(
                    messageID: "m-1/0", correlationID: "m-1", type: "transactionRecords",
                    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        ]
        let plain = RecordedResultsEncoding.encode(results, compressing: false)
        let compressed = RecordedResultsEncoding.encode(results, compressing: true)
        #expect(compressed.count * 3 < plain.count)
    }

    @Test func blobsThisBuildDidNotWriteAreRefusedNotMisread() throws {
        let bytes = RecordedResultsEncoding.encode([Self.result()], compressing: false)
        let compressed = RecordedResultsEncoding.encode([Self.result()], compressing: true)
        var longer = compressed
        longer[1] += 1  // the length it says it decompresses to
        for broken in [
            [], Array(bytes.dropLast()), bytes + [0], [3] + bytes.dropFirst(), Array(compressed.dropLast()),
            compressed + [0], longer, [2] + bytes.dropFirst(),
        ] {
            let error = #expect(throws: StoreError.self) { try Self.decode(broken) }
            #expect(error?.kind == .permanent)
        }
    }
}

extension RecordedResultsEncoding {
    /// `results` in version 2 when `compressing`, else in version 1, on their own (the stores keep a
    /// `RecordedResultsWriter` per batch).
    static func encode(_ results: [OutboundResult], compressing: Bool) -> [UInt8] {
        RecordedResultsWriter(compressing: compressing).withValue(of: results) { Array($0) }
    }
}

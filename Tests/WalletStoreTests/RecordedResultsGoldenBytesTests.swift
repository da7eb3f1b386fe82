import Testing
import WalletRouting

@testable import WalletStore

/// The recorded results as bytes an earlier build wrote, pinned: a store holds them until its retention sweep
/// deletes them, and a replay publishes them again (CONTRACT.md §10), so every later build must read them exactly
/// as they were written, and a build rolled back to must read what a newer one writes. Round trips cannot see a
/// change to the format, the decoder or `RecordedResultsDictionary` that both sides of one build agree on; these
/// bytes can.
///
/// The bytes were written by main at ba4c39f (version 2 as written since SQLite's v5 and PostgreSQL's v7). When they
/// were pinned, liblz4 (python-lz4 4.x: `lz4.block.decompress(block, uncompressed_size=618, dict=<the dictionary's
/// text>)`) decompressed the version 2 block to the version 1 bytes exactly: the format is LZ4's, not ours.
///
/// If one of these fails, do not update the bytes: a change that breaks them breaks every store's data. A new
/// format is a new version (`RecordedResultsEncoding`), read beside the old, with golden bytes of its own.
@Suite struct RecordedResultsGoldenBytesTests {
    /// A CPS message's card event and its `reply_to` copy (the default exchange, the reply queue as its routing key,
    /// no ids), and a TNS message's records with a `traceparent` and non-ASCII text.
    static let results = [
        OutboundResult(
            exchange: "wallet.events", routingKey: "card.suspended",
            body: Array(
                #"{"kind":"cardEvent","messageId":"m-7","correlationId":"m-7","sender":"CPS","processedAt":"2026-11-30T08:00:00.000Z","event":"suspended","digitalCardId":"DC-42","state":"suspended","previousState":"active"}"#
                    .utf8),
            properties: OutboundProperties(
                messageID: "m-7/0", correlationID: "m-7", type: "cardEvent", traceparent: nil)),
        OutboundResult(
            exchange: "", routingKey: "amq.gen-reply", body: Array(#"{"kind":"cardEvent"}"#.utf8),
            properties: OutboundProperties(messageID: nil, correlationID: nil, type: "cardEvent", traceparent: nil)),
        OutboundResult(
            exchange: "wallet.transactions", routingKey: "transactions.records",
            body: Array(
                #"{"kind":"transactionRecords","messageId":"m-8","sender":"TNS","digitalCardId":"DC-42","records":[{"id":"T-1","status":"approved","amount":12.50,"merchantName":"Café Zürich"}]}"#
                    .utf8),
            properties: OutboundProperties(
                messageID: "m-8/0", correlationID: "m-8", type: "transactionRecords",
                traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")),
    ]

    /// Version 1 (uncompressed): the results in one value per message.
    static let version1 = bytes(
        """
        01030d77616c6c65742e6576656e74730e636172642e73757370656e646564cd
        017b226b696e64223a22636172644576656e74222c226d657373616765496422
        3a226d2d37222c22636f7272656c6174696f6e4964223a226d2d37222c227365
        6e646572223a22435053222c2270726f6365737365644174223a22323032362d
        31312d33305430383a30303a30302e3030305a222c226576656e74223a227375
        7370656e646564222c226469676974616c436172644964223a2244432d343222
        2c227374617465223a2273757370656e646564222c2270726576696f75735374
        617465223a22616374697665227d01056d2d372f3001036d2d37096361726445
        76656e7400000d616d712e67656e2d7265706c79147b226b696e64223a226361
        72644576656e74227d000009636172644576656e74001377616c6c65742e7472
        616e73616374696f6e73147472616e73616374696f6e732e7265636f726473b1
        017b226b696e64223a227472616e73616374696f6e5265636f726473222c226d
        6573736167654964223a226d2d38222c2273656e646572223a22544e53222c22
        6469676974616c436172644964223a2244432d3432222c227265636f72647322
        3a5b7b226964223a22542d31222c22737461747573223a22617070726f766564
        222c22616d6f756e74223a31322e35302c226d65726368616e744e616d65223a
        22436166c3a9205ac3bc72696368227d5d7d01056d2d382f3001036d2d381274
        72616e73616374696f6e5265636f726473013730302d34626639326633353737
        623334646136613363653932396430653065343733362d303066303637616130
        626139303262372d3031
        """)

    /// Version 2: the version 1 bytes above as an LZ4 block against `RecordedResultsDictionary.version2`.
    static let version2 = bytes(
        """
        02ea043301030d0f0301420521730ec00505d30325cd01f10200190011456605
        00670006e802306d2d379c000beb0202160005ee020fb60501010c018231312d
        33305430380c0104ee02018c0035223a2288000042010b02035344432d34323c
        0100ec00082c000b7d041022f500f5027665227d01056d2d372f3001036d2d37
        09d100ff0200000d616d712e67656e2d7265706c7914f40000377d0000310013
        1334010783032873140d00132e6a0316b14001071f0002af0311735002084901
        1038cf000a21040cf80304f60003600006ca0330542d313e000f490200042202
        4e31322e352302f101436166c3a9205ac3bc72696368227d5d2401123824012e
        3812b500f02a013730302d346266393266333537376233346461366133636539
        32396430653065343733362d303066303637616130626139303262372d3031
        """)

    /// `RecordedResultsDictionary.version2`'s length and FNV-1a 64 digest: every version 2 value depends on each of
    /// its bytes, not only on those the blobs above happen to reach back into.
    static let dictionaryLength = 2_703
    static let dictionaryDigest: UInt64 = 4_236_445_304_606_281_182

    @Test func version1BytesAnEarlierBuildWroteReadBackExactly() throws {
        #expect(try Self.version1.withUnsafeBytes { try RecordedResultsEncoding.decode($0) } == Self.results)
    }

    @Test func version2BytesAnEarlierBuildWroteReadBackExactly() throws {
        #expect(try Self.version2.withUnsafeBytes { try RecordedResultsEncoding.decode($0) } == Self.results)
    }

    /// What this build writes is what earlier builds wrote, so a build rolled back to reads it. A compressor changed on
    /// purpose may write other valid blocks: then keep the bytes above for the read tests, and pin its output beside
    /// them once a build before the change has been seen to read it.
    @Test func thisBuildWritesTheSameBytes() {
        #expect(
            Self.hex(RecordedResultsEncoding.encode(Self.results, compressing: false)) == Self.hex(Self.version1))
        #expect(
            Self.hex(RecordedResultsEncoding.encode(Self.results, compressing: true)) == Self.hex(Self.version2))
    }

    @Test func theVersion2DictionaryIsTheOneEveryStoreWasWrittenWith() {
        let bytes = RecordedResultsDictionary.version2.bytes
        #expect(bytes.count == Self.dictionaryLength)
        #expect(Self.fnv1a64(bytes) == Self.dictionaryDigest)
    }

    // MARK: - Helpers

    /// Hexadecimal text, whitespace ignored.
    static func bytes(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8.filter { !$0.isWhitespace })
        precondition(digits.count.isMultiple(of: 2), "an odd number of hexadecimal digits")
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(digit(digits[$0]) << 4 | digit(digits[$0 + 1])) }
    }

    private static func digit(_ character: UInt8) -> UInt8 {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: preconditionFailure("not a lowercase hexadecimal digit: \(character)")
        }
    }

    /// Lowercase hexadecimal, 64 digits a line: what the constants above are written as.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        var lines: [String] = []
        var line = ""
        for byte in bytes {
            line.append(digits[Int(byte >> 4)])
            line.append(digits[Int(byte & 0xF)])
            if line.count == 64 {
                lines.append(line)
                line = ""
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    static func fnv1a64(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}

extension UInt8 {
    fileprivate var isWhitespace: Bool { self == 0x20 || self == 0x0A || self == 0x09 || self == 0x0D }
}

import TestSupport
import Testing

@testable import WalletStore

@Suite struct LZ4BlockTests {
    private static let emptyDictionary = LZ4Block.Dictionary([])

    private static func roundTrip(_ input: [UInt8], _ dictionary: LZ4Block.Dictionary) throws -> [UInt8] {
        let block = input.withUnsafeBytes { LZ4Block.compress($0, dictionary: dictionary) }
        #expect(block.count <= LZ4Block.bound(input.count))
        return try block.withUnsafeBytes { try LZ4Block.decompress($0, count: input.count, dictionary: dictionary) }
    }

    /// Inputs at the format's edges: empty, shorter than a match may start in (13 bytes), runs that overlap their
    /// own match, text that does not compress, and more than one offset can reach back (64 KiB).
    private static var inputs: [[UInt8]] {
        var random = SplitMix64(seed: 38)
        let noise = (0..<5_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let json = Array(
            #"{"kind":"transactionRecords","records":[{"id":"T-1","status":"approved","amount":12.50}]}"#.utf8)
        var far = (0..<70_000).map { _ in UInt8(truncatingIfNeeded: random.next() % 4) }
        far += far.prefix(300)
        return [
            [], [7], Array("twelve bytes".utf8), Array("thirteen byte".utf8), Array(repeating: 0x61, count: 10_000),
            noise, json, Array(repeating: json, count: 40).flatMap { $0 }, far,
        ] + (1..<40).map { Array(json.prefix($0)) }
    }

    @Test func everyInputComesBackExactly() throws {
        let dictionary = LZ4Block.Dictionary(Array(#"{"kind":"transactionRecords","status":"approved"}"#.utf8))
        for input in Self.inputs {
            #expect(try Self.roundTrip(input, Self.emptyDictionary) == input)
            #expect(try Self.roundTrip(input, dictionary) == input)
            #expect(try Self.roundTrip(input, RecordedResultsDictionary.version2) == input)
        }
    }

    /// A compressor kept from block to block (as a batch keeps one) writes each block as a fresh one would: its
    /// table starts again from the dictionary's, and its text grows for an input larger than it has room for.
    @Test func aKeptCompressorWritesWhatAFreshOneWrites() throws {
        let compressor = LZ4Block.Compressor(dictionary: RecordedResultsDictionary.version2, inputCapacity: 16)
        for input in Self.inputs + Self.inputs.reversed() {
            let kept = [UInt8](unsafeUninitializedCapacity: LZ4Block.bound(input.count)) { output, written in
                written = input.withUnsafeBytes { compressor.compress($0, into: output) }
            }
            let fresh = input.withUnsafeBytes { LZ4Block.compress($0, dictionary: RecordedResultsDictionary.version2) }
            #expect(kept == fresh)
        }
    }

    @Test func repeatedTextAndTheDictionaryShrinkTheBlock() throws {
        let run = Array(repeating: UInt8(0x61), count: 10_000)
        #expect(run.withUnsafeBytes { LZ4Block.compress($0, dictionary: Self.emptyDictionary) }.count < 100)
        let result = Array(
            #"{"kind":"cardEvent","messageId":"m-7","correlationId":"m-7","sender":"CPS","processedAt":"2026-11-30T08:00:00.000Z","event":"suspended","digitalCardId":"c-1","tokenizedCardId":"t-1","serverMessage":{"code":"CBP.info.tokenSuspended","text":"Suspended","severity":"info","params":[]},"state":"suspended","previousState":"active"}"#
                .utf8)
        let alone = result.withUnsafeBytes { LZ4Block.compress($0, dictionary: Self.emptyDictionary) }
        let againstDictionary = result.withUnsafeBytes {
            LZ4Block.compress($0, dictionary: RecordedResultsDictionary.version2)
        }
        #expect(againstDictionary.count < result.count / 2)
        #expect(againstDictionary.count < alone.count * 2 / 3)
    }

    /// Blocks written by liblz4 (python-lz4 4.x, `lz4.block.compress(data, store_size=False, dict=...)`): the
    /// format is LZ4's, not one of our own.
    @Test func blocksLiblz4WroteDecompress() throws {
        let data = Array(
            (#"{"kind":"cardEvent","messageId":"m-1/0","sender":"CPS","state":"suspended","previousState":"active"}"#
                + "abcabcabcabcabcabcabcabcabcabc" + String(repeating: "0123456789", count: 3)).utf8)
        let dictionary = LZ4Block.Dictionary(
            Array(#"{"kind":"cardEvent","messageId":"","sender":"CPS","state":"active"}"#.utf8))
        let withDictionary: [UInt8] = [
            15, 67, 0, 14, 95, 109, 45, 49, 47, 48, 72, 0, 7, 251, 6, 115, 117, 115, 112, 101, 110, 100, 101, 100, 34,
            44, 34, 112, 114, 101, 118, 105, 111, 117, 115, 83, 100, 0, 63, 97, 98, 99, 3, 0, 8, 171, 48, 49, 50, 51,
            52, 53, 54, 55, 56, 57, 10, 0, 80, 53, 54, 55, 56, 57,
        ]
        let alone: [UInt8] = [
            243, 70, 123, 34, 107, 105, 110, 100, 34, 58, 34, 99, 97, 114, 100, 69, 118, 101, 110, 116, 34, 44, 34,
            109, 101, 115, 115, 97, 103, 101, 73, 100, 34, 58, 34, 109, 45, 49, 47, 48, 34, 44, 34, 115, 101, 110, 100,
            101, 114, 34, 58, 34, 67, 80, 83, 34, 44, 34, 115, 116, 97, 116, 101, 34, 58, 34, 115, 117, 115, 112, 101,
            110, 100, 101, 100, 34, 44, 34, 112, 114, 101, 118, 105, 111, 117, 115, 83, 28, 0, 191, 97, 99, 116, 105,
            118, 101, 34, 125, 97, 98, 99, 3, 0, 8, 171, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 10, 0, 80, 53, 54, 55,
            56, 57,
        ]
        #expect(
            try withDictionary.withUnsafeBytes {
                try LZ4Block.decompress($0, count: data.count, dictionary: dictionary)
            }
                == data)
        #expect(
            try alone.withUnsafeBytes {
                try LZ4Block.decompress($0, count: data.count, dictionary: Self.emptyDictionary)
            } == data)
    }

    @Test func brokenBlocksAreRefusedNeverOverrun() throws {
        let input = Array(repeating: Array(#"{"status":"approved","amount":1.00}"#.utf8), count: 8).flatMap { $0 }
        let block = input.withUnsafeBytes { LZ4Block.compress($0, dictionary: Self.emptyDictionary) }
        func decompress(_ block: [UInt8], count: Int) throws -> [UInt8] {
            try block.withUnsafeBytes { try LZ4Block.decompress($0, count: count, dictionary: Self.emptyDictionary) }
        }
        // Truncated, a count that is not the block's, an offset of 0, an offset before the first byte.
        for (broken, count) in [
            ([], input.count), (Array(block.dropLast()), input.count), (block, input.count - 1),
            (block, input.count + 1), ([0x14, 0x61, 0x00, 0x00, 0x00], 9), ([0x14, 0x61, 0x05, 0x00, 0x00], 9),
        ] {
            #expect(throws: LZ4Block.Corrupt.self) { try decompress(broken, count: count) }
        }
        // Any byte changed: refused, or exactly `count` bytes (a changed literal), never a crash.
        var random = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            var broken = block
            broken[random.next(below: broken.count)] = UInt8(truncatingIfNeeded: random.next())
            if let output = try? decompress(broken, count: input.count) { #expect(output.count == input.count) }
        }
    }
}

extension LZ4Block {
    /// `input` compressed on its own, matches reaching into `dictionary` (the stores keep a `Compressor` per batch).
    static func compress(_ input: UnsafeRawBufferPointer, dictionary: Dictionary) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bound(input.count)) { output, written in
            written = Compressor(dictionary: dictionary).compress(input, into: output)
        }
    }
}

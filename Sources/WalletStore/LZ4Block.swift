/// LZ4's block format (lz4_Block_format.md in the lz4 repository), with a preset dictionary, in Swift: the stores
/// compress each message's recorded results with it (`RecordedResultsEncoding`, version 2).
///
/// A block is a series of sequences: a token (literal count in the high nibble, match length less 4 in the low, 15
/// meaning "more in the bytes that follow": 255 each, then the rest), the literals, a match offset (2 bytes, little
/// endian, at most 65,535 back), the extra match length. The last sequence is literals only; the last 5 bytes are
/// always literals and no match starts within the last 12 (the format's end rules, kept so liblz4 can read what
/// this writes). A dictionary is text both sides know before the block: matches may reach back into it, as
/// `LZ4_compress_fast_continue` after `LZ4_loadDict` and `LZ4_decompress_safe_usingDict` do.
///
/// The compressor is LZ4's fast one: a hash table of the last position of each 4-byte sequence, no match search
/// beyond it, and larger steps through text that does not compress. In Swift rather than through liblz4: no
/// C dependency for a few hundred bytes per message (about 2 µs each, Benchmarks/README.md).
enum LZ4Block {
    /// Text both sides hold before every block, with its positions already hashed.
    struct Dictionary: Sendable {
        let bytes: [UInt8]
        /// The compressor's starting table: each hash's last position in `bytes`, plus one (0: none).
        fileprivate let table: [UInt32]

        init(_ bytes: [UInt8]) {
            precondition(bytes.count <= LZ4Block.maximumOffset, "an LZ4 dictionary is at most 64 KiB")
            self.bytes = bytes
            var table = [UInt32](repeating: 0, count: 1 << LZ4Block.hashBits)
            if bytes.count >= 4 {
                bytes.withUnsafeBytes { source in
                    for position in 0...(bytes.count - 4) {
                        table[LZ4Block.hash(source.loadUnaligned(fromByteOffset: position, as: UInt32.self))] =
                            UInt32(position + 1)
                    }
                }
            }
            self.table = table
        }
    }

    /// The block could not be decompressed: truncated, or naming bytes it does not have.
    struct Corrupt: Error {}

    fileprivate static let hashBits = 10
    static let maximumOffset = 65_535
    private static let minimumMatch = 4
    /// No match starts in a block's last 12 bytes, and its last 5 are literals.
    private static let matchStartLimit = 12
    private static let lastLiterals = 5

    fileprivate static func hash(_ sequence: UInt32) -> Int {
        Int((sequence &* 2_654_435_761) >> (32 - UInt32(hashBits)))
    }

    /// The most bytes `count` bytes compress to.
    static func bound(_ count: Int) -> Int { count + count / 255 + 16 }

    /// The compressor's working memory, kept from block to block: the text (the dictionary, then the input) and the
    /// hash table. A store keeps one for a batch, so a block costs no allocation of its own; the dictionary is
    /// copied in once, the table reset from the dictionary's for each block.
    final class Compressor {
        let dictionary: Dictionary
        /// The dictionary's bytes, then room for an input and 8 zero bytes after it (a word read near the input's
        /// end compares them, never past the buffer).
        private var text: UnsafeMutableRawBufferPointer
        private let table: UnsafeMutableBufferPointer<UInt32>

        init(dictionary: Dictionary, inputCapacity: Int = 2_048) {
            self.dictionary = dictionary
            text = Self.allocateText(dictionary, inputCapacity: inputCapacity)
            table = .allocate(capacity: 1 << LZ4Block.hashBits)
            table.initialize(repeating: 0)
        }

        deinit {
            text.deallocate()
            table.deallocate()
        }

        /// Compresses `input` into `output` (at least `bound(input.count)` bytes); returns the bytes written.
        func compress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
            let start = dictionary.bytes.count
            let end = start + input.count
            if end + 8 > text.count {
                text.deallocate()
                text = Self.allocateText(dictionary, inputCapacity: max(input.count, 2 * (text.count - start)))
            }
            UnsafeMutableRawBufferPointer(rebasing: text[start..<end]).copyMemory(from: input)
            UnsafeMutableRawBufferPointer(rebasing: text[end..<(end + 8)]).initializeMemory(
                as: UInt8.self, repeating: 0)
            _ = dictionary.table.withUnsafeBufferPointer { table.update(fromContentsOf: $0) }
            return LZ4Block.compress(
                text: UnsafeRawBufferPointer(rebasing: text[..<(end + 8)]), start: start, end: end, table: table,
                output: output)
        }

        private static func allocateText(_ dictionary: Dictionary, inputCapacity: Int) -> UnsafeMutableRawBufferPointer
        {
            let text = UnsafeMutableRawBufferPointer.allocate(
                byteCount: dictionary.bytes.count + inputCapacity + 8, alignment: 8)
            dictionary.bytes.withUnsafeBytes { text.copyMemory(from: $0) }
            return text
        }
    }

    private static func compress(
        text: UnsafeRawBufferPointer, start: Int, end: Int, table: UnsafeMutableBufferPointer<UInt32>,
        output: UnsafeMutableBufferPointer<UInt8>
    ) -> Int {
        var writer = Writer(output: output)
        var anchor = start
        var position = start
        let matchStartEnd = end - matchStartLimit
        let matchEnd = end - lastLiterals
        while position < matchStartEnd {
            let sequence = text.loadUnaligned(fromByteOffset: position, as: UInt32.self)
            let slot = hash(sequence)
            let candidate = Int(table[slot]) - 1
            table[slot] = UInt32(position + 1)
            guard candidate >= 0, position - candidate <= maximumOffset,
                text.loadUnaligned(fromByteOffset: candidate, as: UInt32.self) == sequence
            else {
                // The longer since the last match, the larger the step (LZ4's acceleration).
                position += 1 + (position - anchor) >> 6
                continue
            }
            var matchStart = position
            var reference = candidate
            while matchStart > anchor, reference > 0, text[matchStart - 1] == text[reference - 1] {
                matchStart -= 1
                reference -= 1
            }
            // Forward a word at a time: the first differing byte is the lowest set bit of the difference.
            var length = position + minimumMatch - matchStart
            while matchStart + length < matchEnd {
                let difference =
                    text.loadUnaligned(fromByteOffset: matchStart + length, as: UInt64.self)
                    ^ text.loadUnaligned(fromByteOffset: reference + length, as: UInt64.self)
                if difference != 0 {
                    length += UInt64(littleEndian: difference).trailingZeroBitCount >> 3
                    break
                }
                length += 8
            }
            length = min(length, matchEnd - matchStart)
            writer.sequence(
                literals: UnsafeRawBufferPointer(rebasing: text[anchor..<matchStart]),
                offset: matchStart - reference, matchLength: length)
            position = matchStart + length
            anchor = position
            if position < matchStartEnd {
                let before = position - 2
                table[hash(text.loadUnaligned(fromByteOffset: before, as: UInt32.self))] = UInt32(before + 1)
            }
        }
        writer.lastLiterals(UnsafeRawBufferPointer(rebasing: text[anchor..<end]))
        return writer.count
    }

    /// The `count` bytes `block` holds, its matches reaching into `dictionary`.
    /// - Throws: `Corrupt` when the block does not decode to exactly `count` bytes.
    static func decompress(_ block: UnsafeRawBufferPointer, count: Int, dictionary: Dictionary) throws(Corrupt)
        -> [UInt8]
    {
        let start = dictionary.bytes.count
        var text = [UInt8](repeating: 0, count: start + count)
        try text.withUnsafeMutableBufferPointer { (text: inout UnsafeMutableBufferPointer<UInt8>) throws(Corrupt) in
            dictionary.bytes.withUnsafeBytes { UnsafeMutableRawBufferPointer(text).copyMemory(from: $0) }
            var input = 0
            var output = start
            func length(_ nibble: Int) throws(Corrupt) -> Int {
                var length = nibble
                guard nibble == 15 else { return length }
                while true {
                    guard input < block.count else { throw Corrupt() }
                    let byte = Int(block[input])
                    input += 1
                    length += byte
                    guard length <= block.count + text.count else { throw Corrupt() }
                    if byte != 255 { return length }
                }
            }
            while true {
                guard input < block.count else { throw Corrupt() }
                let token = Int(block[input])
                input += 1
                let literals = try length(token >> 4)
                guard literals <= block.count - input, literals <= text.count - output else { throw Corrupt() }
                UnsafeMutableRawBufferPointer(
                    rebasing: UnsafeMutableRawBufferPointer(text)[output..<(output + literals)]
                )
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: block[input..<(input + literals)]))
                input += literals
                output += literals
                if input == block.count { break }
                guard block.count - input >= 2 else { throw Corrupt() }
                let offset = Int(block[input]) | Int(block[input + 1]) << 8
                input += 2
                let matchLength = try length(token & 15) + minimumMatch
                guard offset > 0, offset <= output, matchLength <= text.count - output else { throw Corrupt() }
                // Byte by byte: a match may overlap the bytes it writes (a run).
                var from = output - offset
                for _ in 0..<matchLength {
                    text[output] = text[from]
                    output += 1
                    from += 1
                }
            }
            guard output == text.count else { throw Corrupt() }
        }
        return Array(text[start...])
    }

    /// Writes sequences into a buffer of `bound` bytes.
    private struct Writer {
        let output: UnsafeMutableBufferPointer<UInt8>
        var count = 0

        init(output: UnsafeMutableBufferPointer<UInt8>) { self.output = output }

        mutating func sequence(literals: UnsafeRawBufferPointer, offset: Int, matchLength: Int) {
            let matchCode = matchLength - LZ4Block.minimumMatch
            token(literals: literals.count, match: matchCode)
            extraLength(literals.count)
            copy(literals)
            output[count] = UInt8(truncatingIfNeeded: offset)
            output[count + 1] = UInt8(truncatingIfNeeded: offset >> 8)
            count += 2
            extraLength(matchCode)
        }

        mutating func lastLiterals(_ literals: UnsafeRawBufferPointer) {
            token(literals: literals.count, match: 0)
            extraLength(literals.count)
            copy(literals)
        }

        private mutating func token(literals: Int, match: Int) {
            output[count] = UInt8(min(literals, 15) << 4 | min(match, 15))
            count += 1
        }

        /// What a nibble of 15 leaves to the bytes after it.
        private mutating func extraLength(_ length: Int) {
            guard length >= 15 else { return }
            var rest = length - 15
            while rest >= 255 {
                output[count] = 255
                count += 1
                rest -= 255
            }
            output[count] = UInt8(rest)
            count += 1
        }

        private mutating func copy(_ bytes: UnsafeRawBufferPointer) {
            guard !bytes.isEmpty else { return }
            UnsafeMutableRawBufferPointer(
                rebasing: UnsafeMutableRawBufferPointer(output)[count..<(count + bytes.count)]
            )
            .copyMemory(from: bytes)
            count += bytes.count
        }
    }
}

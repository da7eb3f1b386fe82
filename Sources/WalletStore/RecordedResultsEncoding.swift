import WalletRouting

/// The results recorded with a processed `message_id`, as one compact blob (CONTRACT.md §10: a replay
/// republishes them verbatim).
///
/// One value per message instead of one row per result: the end-to-end profile showed the per-result rows (and
/// their index) as most of the store's write volume. The format is private to the stores and versioned by its
/// first byte:
///
///     version 1: count, then per result: exchange, routing key, body, message id?, correlation id?, type,
///                traceparent?
///     version 2: the length of a version 1 blob, then that blob compressed: an LZ4 block
///                (`LZ4Block`) against `RecordedResultsDictionary.version2`
///
/// Counts and lengths are unsigned LEB128; an optional field is a presence byte (0 or 1) before its value. Every
/// build since version 2 reads both; which one a store writes is the store's schema's to say (a build before version
/// 2 cannot read it: SQLite's v5, PostgreSQL's v7).
enum RecordedResultsEncoding {
    static let uncompressed: UInt8 = 1
    static let compressed: UInt8 = 2

    /// Version 1.
    static func encode(_ results: [OutboundResult]) -> [UInt8] {
        var bytes: [UInt8] = []
        appendUncompressed(results, to: &bytes)
        return bytes
    }

    /// Appends `results` in version 1.
    static func appendUncompressed(_ results: [OutboundResult], to bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + 8 + results.reduce(0) { $0 + $1.body.count + 160 })
        bytes.append(uncompressed)
        appendLength(results.count, to: &bytes)
        for result in results {
            append(result.exchange, to: &bytes)
            append(result.routingKey, to: &bytes)
            appendLength(result.body.count, to: &bytes)
            bytes.append(contentsOf: result.body)
            appendOptional(result.properties.messageID, to: &bytes)
            appendOptional(result.properties.correlationID, to: &bytes)
            append(result.properties.type, to: &bytes)
            appendOptional(result.properties.traceparent, to: &bytes)
        }
    }

    /// The most bytes a version 1 blob of `count` bytes takes in version 2.
    static func compressedBound(_ count: Int) -> Int { 11 + LZ4Block.bound(count) }

    /// Writes the version 1 blob `plain` in version 2 into `output` (at least `compressedBound(plain.count)`
    /// bytes) with `compressor` (whose dictionary is `RecordedResultsDictionary.version2`); returns the bytes written.
    static func compress(
        _ plain: UnsafeRawBufferPointer, with compressor: LZ4Block.Compressor,
        into output: UnsafeMutableBufferPointer<UInt8>
    ) -> Int {
        // The version, the length (LEB128, at most 10 bytes), the block.
        output[0] = compressed
        var written = 1
        forEachLengthByte(plain.count) { byte in
            output[written] = byte
            written += 1
        }
        return written + compressor.compress(plain, into: UnsafeMutableBufferPointer(rebasing: output[written...]))
    }

    /// - Throws: a permanent `StoreError` when the bytes are not a blob of a version this build knows.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws(StoreError) -> [OutboundResult] {
        var reader = Reader(bytes: bytes)
        switch try reader.byte() {
        case uncompressed:
            break
        case compressed:
            let count = try reader.uncompressedLength()
            let block = UnsafeRawBufferPointer(rebasing: bytes[reader.offset...])
            let plain: [UInt8]
            do {
                plain = try LZ4Block.decompress(block, count: count, dictionary: RecordedResultsDictionary.version2)
            } catch {
                throw Reader.corrupt
            }
            let results = plain.withUnsafeBytes { plain -> Result<[OutboundResult], StoreError> in
                guard plain.first == uncompressed else { return .failure(Reader.corrupt) }
                return Result { () throws(StoreError) in try decode(plain) }
            }
            return try results.get()
        default:
            throw StoreError(.permanent, "recorded results use an unknown encoding version \(bytes[0])")
        }
        let count = try reader.length()
        var results: [OutboundResult] = []
        results.reserveCapacity(count)
        for _ in 0..<count {
            let exchange = try reader.string()
            let routingKey = try reader.string()
            let body = try reader.byteArray()
            let messageID = try reader.optionalString()
            let correlationID = try reader.optionalString()
            let type = try reader.string()
            let traceparent = try reader.optionalString()
            results.append(
                OutboundResult(
                    exchange: exchange, routingKey: routingKey, body: body,
                    properties: OutboundProperties(
                        messageID: messageID, correlationID: correlationID, type: type, traceparent: traceparent)))
        }
        guard reader.isAtEnd else { throw Reader.corrupt }
        return results
    }

    // MARK: - Writing

    private static func appendLength(_ length: Int, to bytes: inout [UInt8]) {
        forEachLengthByte(length) { bytes.append($0) }
    }

    /// `length` as unsigned LEB128, a byte at a time.
    private static func forEachLengthByte(_ length: Int, _ body: (UInt8) -> Void) {
        var value = UInt(length)
        while value >= 0x80 {
            body(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        body(UInt8(value))
    }

    private static func append(_ string: String, to bytes: inout [UInt8]) {
        appendLength(string.utf8.count, to: &bytes)
        bytes.append(contentsOf: string.utf8)
    }

    private static func appendOptional(_ string: String?, to bytes: inout [UInt8]) {
        guard let string else { return bytes.append(0) }
        bytes.append(1)
        append(string, to: &bytes)
    }

    // MARK: - Reading

    private struct Reader {
        static let corrupt = StoreError(.permanent, "recorded results are corrupt (a truncated or overlong blob)")

        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        mutating func byte() throws(StoreError) -> UInt8 {
            guard offset < bytes.count else { throw Self.corrupt }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func length() throws(StoreError) -> Int {
            let value = try leb128()
            guard value <= UInt(bytes.count - offset) else { throw Self.corrupt }
            return Int(value)
        }

        /// A compressed blob's length once decompressed: at most what LZ4 can expand the rest to (255 to 1).
        mutating func uncompressedLength() throws(StoreError) -> Int {
            let value = try leb128()
            guard value <= UInt(bytes.count - offset) * 255 + 16 else { throw Self.corrupt }
            return Int(value)
        }

        private mutating func leb128() throws(StoreError) -> UInt {
            var value: UInt = 0
            var shift: UInt = 0
            while true {
                let byte = try byte()
                guard shift < 63 else { throw Self.corrupt }
                value |= UInt(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return value
        }

        mutating func byteArray() throws(StoreError) -> [UInt8] {
            let count = try length()
            defer { offset += count }
            return Array(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
        }

        mutating func string() throws(StoreError) -> String {
            let count = try length()
            defer { offset += count }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]), as: UTF8.self)
        }

        mutating func optionalString() throws(StoreError) -> String? {
            switch try byte() {
            case 0: return nil
            case 1: return try string()
            default: throw Self.corrupt
            }
        }
    }
}

/// ASCII-only case folding. The contract's case-insensitive keys and values are all ASCII, and folding only
/// ASCII keeps look-alikes out (`ſ` upper-cases to `S` in Unicode, but `cpſ` is not `CPS`).
enum ASCIICase {
    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
    }

    @inline(__always)
    static func uppercased(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "a") < 26 ? byte & ~0x20 : byte
    }

    /// Whether `text` equals `target` ignoring ASCII case.
    static func equals(_ text: String, _ target: StaticString) -> Bool {
        let targetBytes = UnsafeBufferPointer(start: target.utf8Start, count: target.utf8CodeUnitCount)
        let utf8 = text.utf8
        guard utf8.count == targetBytes.count else { return false }
        // Over the contiguous bytes when the string has them (native and small strings do): iterating the
        // UTF-8 view decodes byte by byte, which was a visible cost on every notification.
        let contiguous: Bool? = utf8.withContiguousStorageIfAvailable { bytes in
            for index in 0..<bytes.count where lowercased(bytes[index]) != lowercased(targetBytes[index]) {
                return false
            }
            return true
        }
        if let contiguous { return contiguous }
        var index = 0
        for byte in utf8 {
            guard lowercased(byte) == lowercased(targetBytes[index]) else { return false }
            index += 1
        }
        return true
    }

    /// `text` with ASCII letters lower-cased; other characters unchanged.
    static func lowercased(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 &- UInt8(ascii: "A") < 26 }) else { return text }
        return String(decoding: text.utf8.map(lowercased), as: UTF8.self)
    }
}

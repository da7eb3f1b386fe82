/// Writes compact JSON straight into a byte buffer.
///
/// Results are written with this rather than `JSONEncoder`: it costs one copy into place per token and no
/// intermediate dictionaries, which keeps encoding off the worker's profile. Commas are placed
/// automatically: a value or key that follows a completed value gets one.
public struct JSONWriter: Sendable {
    /// Allocated space; only the first `count` bytes are written. The storage is kept longer than what is written
    /// so that a token costs one capacity check and one copy into place, instead of an `Array` append per byte
    /// run (the appends were most of the cost of echoing a TNS history).
    private var storage: [UInt8]
    private var count = 0

    /// The bytes written so far.
    public var bytes: [UInt8] {
        Array(storage[..<count])
    }

    public init(reservingCapacity capacity: Int = 512) {
        storage = [UInt8](repeating: 0, count: Swift.max(capacity, 16))
    }

    /// The bytes written so far, handing over the writer's storage without copying it; the writer is empty after.
    public mutating func takeBytes() -> [UInt8] {
        storage.removeSubrange(count...)
        var taken: [UInt8] = []
        swap(&taken, &storage)
        count = 0
        return taken
    }

    // MARK: - Structure

    public mutating func beginObject() {
        write(2) { base, at in
            let at = Self.separate(base, at)
            base[at] = UInt8(ascii: "{")
            return at + 1
        }
    }

    public mutating func endObject() {
        appendByte(UInt8(ascii: "}"))
    }

    public mutating func beginArray() {
        write(2) { base, at in
            let at = Self.separate(base, at)
            base[at] = UInt8(ascii: "[")
            return at + 1
        }
    }

    public mutating func endArray() {
        appendByte(UInt8(ascii: "]"))
    }

    /// Writes a key the program spells itself (ASCII, nothing to escape).
    public mutating func key(_ key: StaticString) {
        let length = key.utf8CodeUnitCount
        let source = key.utf8Start
        write(length + 4) { base, at in
            var at = Self.separate(base, at)
            base[at] = UInt8(ascii: "\"")
            (base + at + 1).update(from: source, count: length)
            at += length + 1
            base[at] = UInt8(ascii: "\"")
            base[at + 1] = UInt8(ascii: ":")
            return at + 2
        }
    }

    /// Writes a key that came from input, escaped.
    ///
    /// Disfavoured so that a literal key (`writer.key("kind")`) takes the `StaticString` overload, which copies
    /// the bytes without scanning them for escapes.
    @_disfavoredOverload
    public mutating func key(_ key: String) {
        appendEscaped(key)
        appendByte(UInt8(ascii: ":"))
    }

    // MARK: - Values

    public mutating func null() {
        appendASCII("null")
    }

    public mutating func bool(_ value: Bool) {
        appendASCII(value ? "true" : "false")
    }

    public mutating func int(_ value: Int) {
        write(21) { base, at in
            var at = Self.separate(base, at)
            if value < 0 {
                base[at] = UInt8(ascii: "-")
                at += 1
            }
            var magnitude = value.magnitude
            var digits = 1
            var scan = magnitude
            while scan >= 10 {
                scan /= 10
                digits += 1
            }
            var index = at + digits - 1
            repeat {
                base[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                index -= 1
            } while magnitude > 0
            return at + digits
        }
    }

    public mutating func number(_ value: JSONNumber) {
        var literal = value.literal
        literal.withUTF8 { appendSeparated($0) }
    }

    public mutating func string(_ value: String) {
        appendEscaped(value)
    }

    /// Writes the string, or `null` when it is absent.
    public mutating func string(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    /// Writes an already-encoded JSON fragment the caller guarantees is one valid JSON value.
    public mutating func raw(_ encoded: some Sequence<UInt8>) {
        let copied: Void? = encoded.withContiguousStorageIfAvailable { appendSeparated($0) }
        if copied == nil {
            let contiguous = Array(encoded)
            contiguous.withUnsafeBufferPointer { appendSeparated($0) }
        }
    }

    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let bool): self.bool(bool)
        case .number(let number): self.number(number)
        case .string(let string): self.string(string)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let object):
            beginObject()
            for member in object.members {
                key(member.key)
                self.value(member.value)
            }
            endObject()
        }
    }

    // MARK: - Bytes

    /// Makes room for at least `maximum` more bytes, then lets `body` write at `base + at` and return the new end.
    @inline(__always)
    private mutating func write(_ maximum: Int, _ body: (UnsafeMutablePointer<UInt8>, Int) -> Int) {
        if count + maximum > storage.count { grow(toHold: count + maximum) }
        let at = count
        count = storage.withUnsafeMutableBufferPointer { body($0.baseAddress!, at) }
    }

    @inline(never)
    private mutating func grow(toHold needed: Int) {
        var larger = [UInt8](repeating: 0, count: Swift.max(needed, storage.count * 2))
        let written = count
        larger.withUnsafeMutableBufferPointer { target in
            storage.withUnsafeBufferPointer { source in
                target.baseAddress!.update(from: source.baseAddress!, count: written)
            }
        }
        storage = larger
    }

    /// A comma is due unless nothing was written yet, or the last byte opened a container or ended a key.
    /// Returns where the next token starts. The caller reserved one byte for the comma.
    @inline(__always)
    private static func separate(_ base: UnsafeMutablePointer<UInt8>, _ at: Int) -> Int {
        guard at > 0 else { return at }
        switch base[at - 1] {
        case UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: ":"): return at
        default:
            base[at] = UInt8(ascii: ",")
            return at + 1
        }
    }

    @inline(__always)
    private mutating func appendByte(_ byte: UInt8) {
        write(1) { base, at in
            base[at] = byte
            return at + 1
        }
    }

    private mutating func appendASCII(_ text: StaticString) {
        appendSeparated(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A separator if due, then `source` as it is.
    private mutating func appendSeparated(_ source: UnsafeBufferPointer<UInt8>) {
        let length = source.count
        write(length + 1) { base, at in
            let at = Self.separate(base, at)
            if let start = source.baseAddress { (base + at).update(from: start, count: length) }
            return at + length
        }
    }

    // MARK: - Reserved output (module-internal)

    /// A write position inside space the writer has already made room for. For shapes written many times per
    /// result (a TNS history echoes up to ten records): no capacity check, uniqueness check or separator logic
    /// per token. Only valid inside `withReservedOutput`; do not let it escape.
    ///
    /// The caller reserves room for its punctuation and for its strings as they are, unescaped. A string that
    /// needs escaping and would not fit marks the output overflowed: nothing more is written and
    /// `withReservedOutput` returns false, so that the caller writes the shape again through the checked API.
    struct ReservedOutput {
        fileprivate let base: UnsafeMutablePointer<UInt8>
        fileprivate var at: Int
        fileprivate let limit: Int
        fileprivate(set) var overflowed = false

        /// Punctuation and keys spelled by the program, written as they are (e.g. `,"date":`).
        mutating func fragment(_ text: StaticString) {
            guard !overflowed else { return }
            let length = text.utf8CodeUnitCount
            (base + at).update(from: text.utf8Start, count: length)
            at += length
        }

        /// Takes `value.utf8.count + 2` bytes unless it needs escaping.
        mutating func string(_ value: String) {
            guard !overflowed else { return }
            let written: Int?? = value.utf8.withContiguousStorageIfAvailable { write($0) }
            switch written {
            case .some(.some(let end)): at = end
            case .some(.none): overflowed = true
            case .none:
                var contiguous = value
                if let end = contiguous.withUTF8({ write($0) }) { at = end } else { overflowed = true }
            }
        }

        /// The new end, or nil when the escaped string would pass the limit.
        private func write(_ utf8: UnsafeBufferPointer<UInt8>) -> Int? {
            let escaping = JSONWriter.needsEscaping(utf8)
            guard !escaping || at + utf8.count * 6 + 2 <= limit else { return nil }
            return JSONWriter.writeQuoted(utf8, escaping: escaping, to: base, at: at)
        }

        /// Takes `value.literal.utf8.count` bytes.
        mutating func number(_ value: JSONNumber) {
            guard !overflowed else { return }
            let start = at
            let base = base
            let written: Int? = value.literal.utf8.withContiguousStorageIfAvailable { utf8 in
                if let source = utf8.baseAddress { (base + start).update(from: source, count: utf8.count) }
                return start + utf8.count
            }
            if let written {
                at = written
            } else {
                for byte in value.literal.utf8 {
                    base[at] = byte
                    at += 1
                }
            }
        }

        /// Takes at most 5 bytes.
        mutating func bool(_ value: Bool) {
            fragment(value ? "true" : "false")
        }
    }

    /// Writes a separator if one is due, then lets `body` write at most `maximum` bytes. Returns false, with
    /// nothing written, when a string needing escapes did not fit (see `ReservedOutput`).
    mutating func withReservedOutput(maximum: Int, _ body: (inout ReservedOutput) -> Void) -> Bool {
        var completed = true
        write(maximum + 1) { base, at in
            let start = Self.separate(base, at)
            var output = ReservedOutput(base: base, at: start, limit: start + maximum)
            body(&output)
            completed = !output.overflowed
            return completed ? output.at : at
        }
        return completed
    }

    /// Writes `utf8` quoted and escaped at `base + at`; returns the new end. Needs `utf8.count + 2` bytes when
    /// nothing is escaped, at most `utf8.count * 6 + 2`.
    @inline(__always)
    fileprivate static func writeQuoted(
        _ utf8: UnsafeBufferPointer<UInt8>, escaping: Bool, to base: UnsafeMutablePointer<UInt8>, at start: Int
    ) -> Int {
        var at = start
        base[at] = UInt8(ascii: "\"")
        at += 1
        if !escaping {
            if let source = utf8.baseAddress { (base + at).update(from: source, count: utf8.count) }
            at += utf8.count
        } else {
            at = writeEscaped(utf8, to: base, at: at)
        }
        base[at] = UInt8(ascii: "\"")
        return at + 1
    }

    /// The escaping loop, for the rare strings that need it.
    private static func writeEscaped(
        _ utf8: UnsafeBufferPointer<UInt8>, to base: UnsafeMutablePointer<UInt8>, at start: Int
    ) -> Int {
        var at = start
        for byte in utf8 {
            guard needsEscaping(byte) else {
                base[at] = byte
                at += 1
                continue
            }
            base[at] = UInt8(ascii: "\\")
            let escaped: UInt8
            switch byte {
            case UInt8(ascii: "\""): escaped = UInt8(ascii: "\"")
            case UInt8(ascii: "\\"): escaped = UInt8(ascii: "\\")
            case 0x0A: escaped = UInt8(ascii: "n")
            case 0x0D: escaped = UInt8(ascii: "r")
            case 0x09: escaped = UInt8(ascii: "t")
            case 0x08: escaped = UInt8(ascii: "b")
            case 0x0C: escaped = UInt8(ascii: "f")
            default:
                let hex: StaticString = "0123456789abcdef"
                base[at + 1] = UInt8(ascii: "u")
                base[at + 2] = UInt8(ascii: "0")
                base[at + 3] = UInt8(ascii: "0")
                base[at + 4] = hex.utf8Start[Int(byte >> 4)]
                base[at + 5] = hex.utf8Start[Int(byte & 0xF)]
                at += 6
                continue
            }
            base[at + 1] = escaped
            at += 2
        }
        return at
    }

    /// A separator if due, then the string in quotes with `"`, `\\` and control characters escaped.
    private mutating func appendEscaped(_ string: String) {
        // Native and small strings lend their UTF-8 without a copy of the string value.
        let done: Void? = string.utf8.withContiguousStorageIfAvailable { appendEscaped(utf8: $0) }
        if done == nil {
            var contiguous = string
            contiguous.withUTF8 { appendEscaped(utf8: $0) }
        }
    }

    private mutating func appendEscaped(utf8: UnsafeBufferPointer<UInt8>) {
        // Room for the separator, the quotes, and six bytes per input byte (`\u001f`) only when escaping.
        let escaping = Self.needsEscaping(utf8)
        write(escaping ? utf8.count * 6 + 3 : utf8.count + 3) { base, at in
            Self.writeQuoted(utf8, escaping: escaping, to: base, at: Self.separate(base, at))
        }
    }

    @inline(__always)
    private static func needsEscaping(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Whether any byte is a control character, `"` or `\\`, eight bytes at a time.
    @inline(__always)
    fileprivate static func needsEscaping(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = utf8.baseAddress else { return false }
        let count = utf8.count
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= count {
            let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            // A byte below n sets its high bit in (word - n per byte) & ~word (exact for n <= 128).
            let control = (word &- ones &* 0x20) & ~word
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let found = (control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & highBits
            if found != 0 { return true }
            index += 8
        }
        while index < count {
            if needsEscaping(base[index]) { return true }
            index += 1
        }
        return false
    }
}

extension JSONValue {
    /// The value as compact JSON bytes.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.takeBytes()
    }
}

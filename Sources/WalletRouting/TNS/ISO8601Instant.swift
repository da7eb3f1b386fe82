/// Reads a transaction `date` (CONTRACT.md §4): `YYYY-MM-DDThh:mm:ss[.fraction]` followed by `Z` or `±hh:mm`.
///
/// Exactly that grammar: upper-case `T` and `Z`, no lower-case variants, no basic format, no leap second.
/// The calendar is checked (month 1-12, day within the month, leap years). Parsed byte by byte because
/// Foundation's ISO 8601 formatter is far too slow for the hot path.
enum ISO8601Instant {
    /// Seconds since the Unix epoch, or nil when `text` does not follow the grammar.
    static func epochSeconds(_ text: String) -> Double? {
        if let result = text.utf8.withContiguousStorageIfAvailable({ epochSeconds(utf8: $0) }) {
            return result
        }
        return Array(text.utf8).withUnsafeBufferPointer { epochSeconds(utf8: $0) }
    }

    static func epochSeconds(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        // The shortest valid form is `YYYY-MM-DDThh:mm:ssZ`.
        guard bytes.count >= 20,
            let year = number(bytes, 0, 4), bytes[4] == UInt8(ascii: "-"),
            let month = number(bytes, 5, 2), bytes[7] == UInt8(ascii: "-"),
            let day = number(bytes, 8, 2), bytes[10] == UInt8(ascii: "T"),
            let hour = number(bytes, 11, 2), bytes[13] == UInt8(ascii: ":"),
            let minute = number(bytes, 14, 2), bytes[16] == UInt8(ascii: ":"),
            let second = number(bytes, 17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= CivilDate.daysInMonth(year: year, month: month),
            hour < 24, minute < 60, second < 60
        else { return nil }

        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            var scale = 1.0
            var digits = 0.0
            while index < bytes.count, let digit = digit(bytes[index]) {
                // Beyond nanoseconds the digits are validated but cannot change a Double instant.
                if index - start < 9 {
                    digits = digits * 10 + Double(digit)
                    scale *= 10
                }
                index += 1
            }
            guard index > start else { return nil }
            fraction = digits / scale
        }

        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard bytes.count - index == 6,
                let offsetHour = number(bytes, index + 1, 2), bytes[index + 3] == UInt8(ascii: ":"),
                let offsetMinute = number(bytes, index + 4, 2),
                offsetHour < 24, offsetMinute < 60
            else { return nil }
            let magnitude = offsetHour * 3600 + offsetMinute * 60
            offsetSeconds = bytes[index] == UInt8(ascii: "-") ? -magnitude : magnitude
            index += 6
        default:
            return nil
        }
        guard index == bytes.count else { return nil }

        let days = CivilDate.daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Double(seconds) + fraction
    }

    @inline(__always)
    private static func digit(_ byte: UInt8) -> Int? {
        let value = byte &- UInt8(ascii: "0")
        return value < 10 ? Int(value) : nil
    }

    /// The decimal number in `count` bytes from `start`, all of which must be digits.
    @inline(__always)
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> Int? {
        var value = 0
        for index in start..<(start + count) {
            guard let digit = digit(bytes[index]) else { return nil }
            value = value * 10 + digit
        }
        return value
    }
}

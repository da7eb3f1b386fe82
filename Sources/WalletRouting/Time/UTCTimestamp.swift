/// Writes instants as ISO 8601 UTC with millisecond precision, e.g. `2026-11-20T10:15:00.000Z`.
///
/// Used for `processedAt` and `keyInfo.expiryDate`. Formatted by hand: `DateFormatter` and
/// `ISO8601DateFormatter` cost microseconds per call, which the worker's budget cannot afford.
enum UTCTimestamp {
    /// The instant `epochSeconds` after 1970-01-01T00:00:00Z, rounded to the nearest millisecond.
    static func string(epochSeconds: Double) -> String {
        let milliseconds = Int((epochSeconds * 1000).rounded())
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = CivilDate.date(daysSinceEpoch: days)
        let secondOfDay = millisecondOfDay / 1000

        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        if year < 0 { bytes.append(UInt8(ascii: "-")) }
        appendDigits(abs(year), width: 4, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(day, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        appendDigits(secondOfDay / 3600, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay / 60 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        appendDigits(millisecondOfDay % 1000, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func floorDivision(_ value: Int, _ divisor: Int) -> (quotient: Int, remainder: Int) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    /// Zero-padded to `width`; wider values keep all their digits.
    private static func appendDigits(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        var digits = 1
        var limit = 10
        while value >= limit, digits < 19 {
            digits += 1
            limit &*= 10
        }
        let count = max(width, digits)
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
        var remaining = value
        var index = start + count - 1
        while remaining > 0 {
            bytes[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        }
    }
}

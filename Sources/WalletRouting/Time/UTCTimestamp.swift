/// Writes instants as ISO 8601 UTC with millisecond precision, e.g. `2026-11-20T10:15:00.000Z`.
///
/// Used for `processedAt` and `keyInfo.expiryDate`. Formatted by hand: `DateFormatter` and
/// `ISO8601DateFormatter` cost microseconds per call, which the worker's budget cannot afford.
enum UTCTimestamp {
    /// The most bytes `write` writes: at most 19 year digits and a sign, then the 20 of `-MM-DDThh:mm:ss.sssZ`.
    static let maximumLength = 40

    /// The instant `epochSeconds` after 1970-01-01T00:00:00Z, rounded to the nearest millisecond.
    static func string(epochSeconds: Double) -> String {
        String(unsafeUninitializedCapacity: maximumLength) { write(epochSeconds: epochSeconds, into: $0) }
    }

    /// Writes the instant as `string(epochSeconds:)` does at the start of `buffer` (at least `maximumLength`
    /// bytes) and returns how many bytes it wrote: results write it into their JSON without making a `String`.
    static func write(epochSeconds: Double, into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let milliseconds = Int((epochSeconds * 1000).rounded())
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = CivilDate.date(daysSinceEpoch: days)
        let secondOfDay = millisecondOfDay / 1000
        precondition(buffer.count >= maximumLength)
        var at = 0
        if year < 0 {
            buffer[at] = UInt8(ascii: "-")
            at += 1
        }
        at = writeDigits(abs(year), width: 4, into: buffer, at: at)
        buffer[at] = UInt8(ascii: "-")
        at = writeDigits(month, width: 2, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: "-")
        at = writeDigits(day, width: 2, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: "T")
        at = writeDigits(secondOfDay / 3600, width: 2, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: ":")
        at = writeDigits(secondOfDay / 60 % 60, width: 2, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: ":")
        at = writeDigits(secondOfDay % 60, width: 2, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: ".")
        at = writeDigits(millisecondOfDay % 1000, width: 3, into: buffer, at: at + 1)
        buffer[at] = UInt8(ascii: "Z")
        return at + 1
    }

    private static func floorDivision(_ value: Int, _ divisor: Int) -> (quotient: Int, remainder: Int) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    /// Zero-padded to `width`; wider values keep all their digits. Returns the index after the last digit.
    private static func writeDigits(
        _ value: Int, width: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int
    ) -> Int {
        var digits = 1
        var limit = 10
        while value >= limit, digits < 19 {
            digits += 1
            limit &*= 10
        }
        let count = max(width, digits)
        var remaining = value
        var index = start + count - 1
        while index >= start {
            buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        }
        return start + count
    }
}

extension JSONWriter {
    /// Writes the instant as a JSON string (`UTCTimestamp.string(epochSeconds:)`), formatted on the stack.
    mutating func utcTimestamp(epochSeconds: Double) {
        // The quotes around it: no escaping is due, the text is ASCII digits and punctuation.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: UTCTimestamp.maximumLength + 2) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            let length = UTCTimestamp.write(
                epochSeconds: epochSeconds, into: UnsafeMutableBufferPointer(rebasing: buffer[1...]))
            buffer[length + 1] = UInt8(ascii: "\"")
            raw(UnsafeBufferPointer(rebasing: buffer[..<(length + 2)]))
        }
    }
}

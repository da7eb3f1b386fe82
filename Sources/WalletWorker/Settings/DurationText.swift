import Foundation

/// Durations as operators write them: `250ms`, `5s`, `1.5s`, `10m`, `24h`; a bare number is seconds.
public enum DurationText {
    /// The longest duration accepted: ten years, far above any sensible setting and far below where the
    /// arithmetic on it (milliseconds in 64 bits, doubled retry delays) could overflow.
    public static let maximum: Duration = .seconds(10 * 365 * 86_400)

    /// What `parse` accepts besides the form, for error messages.
    public static let rangeDescription = "from 0 to 87600h"

    /// The duration, or nil when the text is not one or is out of range (negative, over `maximum`).
    public static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3_600)]
        var number = trimmed
        var scale = 1.0
        for unit in units where trimmed.hasSuffix(unit.suffix) {
            number = String(trimmed.dropLast(unit.suffix.count))
            scale = unit.seconds
            break
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        // Checked in floating point before converting: `Int64(_:)` traps on a value it cannot hold.
        let milliseconds = (value * scale * 1_000).rounded()
        guard milliseconds <= Double(maximum.components.seconds) * 1_000 else { return nil }
        return .milliseconds(Int64(milliseconds))
    }

    /// A duration as operators read it, in the format `parse` reads back: `250ms`, `6.1s`, `12.5m`, `3.2h` (the
    /// largest unit with at least two of it, one decimal at most), never `6.09728623534594 seconds`.
    public static func format(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        func oneDecimal(_ value: Double) -> String {
            let rounded = (value * 10).rounded() / 10
            return rounded == rounded.rounded() ? String(Int64(rounded)) : String(rounded)
        }
        switch abs(seconds) {
        case ..<1: return "\(Int64((seconds * 1_000).rounded()))ms"
        case ..<120: return "\(oneDecimal(seconds))s"
        case ..<7_200: return "\(oneDecimal(seconds / 60))m"
        default: return "\(oneDecimal(seconds / 3_600))h"
        }
    }
}

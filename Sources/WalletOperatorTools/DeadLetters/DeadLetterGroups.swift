import Foundation

/// `dead-letters summary`: the dead letters grouped by reason, sender and routing key, with each group's count and
/// its oldest and newest dead letter. Pure: it adds up the letters it is given.
///
/// Its memory is bounded whatever the queue holds: at most `maximumGroups` groups, each reason cut to
/// `maximumReasonLength` characters; letters of any further group are counted together (`otherGroups`), so the
/// totals stay exact.
public struct DeadLetterGroups: Sendable {
    public struct Key: Sendable, Hashable {
        public var reason: String
        /// Nil when the body names none (not JSON, not read, an installation).
        public var sender: String?
        public var routingKey: String
    }

    public struct Group: Sendable, Hashable {
        public var count = 0
        /// The oldest and newest publication time (`DeadLetter.since`) among its letters that have one.
        public var oldest: Date?
        public var newest: Date?
        /// Letters with no AMQP `timestamp` (kombu and Celery send none): `since` is when the broker dead-lettered
        /// them, if it did, and they count in no age.
        public var withoutTimestamp = 0

        mutating func add(_ letter: DeadLetter) {
            count += 1
            if !letter.hasTimestamp { withoutTimestamp += 1 }
            guard let since = letter.since else { return }
            oldest = min(oldest ?? since, since)
            newest = max(newest ?? since, since)
        }
    }

    public let maximumGroups: Int
    public let maximumReasonLength: Int
    public private(set) var groups: [Key: Group] = [:]
    /// The letters whose group did not fit (`maximumGroups`), counted together.
    public private(set) var otherGroups = Group()
    public private(set) var total = Group()

    /// What `dead-letters summary` keeps (its help says so).
    public static let defaultMaximumGroups = 1_000
    public static let defaultMaximumReasonLength = 200

    public init(
        maximumGroups: Int = defaultMaximumGroups, maximumReasonLength: Int = defaultMaximumReasonLength
    ) {
        self.maximumGroups = maximumGroups
        self.maximumReasonLength = maximumReasonLength
    }

    public mutating func add(_ letter: DeadLetter) {
        let reason =
            letter.reason.count > maximumReasonLength
            ? String(letter.reason.prefix(maximumReasonLength - 1)) + "…" : letter.reason
        let key = Key(reason: reason, sender: letter.sender, routingKey: letter.routingKey)
        total.add(letter)
        if groups[key] != nil || groups.count < maximumGroups {
            groups[key, default: Group()].add(letter)
        } else {
            otherGroups.add(letter)
        }
    }

    /// The groups, the largest first (then by reason, sender and routing key, for a stable order).
    public var rows: [(key: Key, group: Group)] {
        groups.map { (key: $0.key, group: $0.value) }.sorted { left, right in
            if left.group.count != right.group.count { return left.group.count > right.group.count }
            if left.key.reason != right.key.reason { return left.key.reason < right.key.reason }
            if left.key.sender != right.key.sender { return (left.key.sender ?? "") < (right.key.sender ?? "") }
            return left.key.routingKey < right.key.routingKey
        }
    }

    /// A table for a terminal: one row per group, then the other groups and the total.
    public func tableLines(at now: Date) -> [String] {
        func age(_ date: Date?) -> String {
            date.map { DeadLetterPrinter.age(max(0, now.timeIntervalSince($0))) } ?? "-"
        }
        func row(_ count: String, _ oldest: String, _ newest: String, _ sender: String, _ key: String, _ reason: String)
            -> String
        {
            func cell(_ text: String, _ width: Int) -> String {
                let cut = text.count > width ? String(text.prefix(width - 1)) + "…" : text
                return cut.padding(toLength: width, withPad: " ", startingAt: 0)
            }
            return
                "\(cell(count, 8)) \(cell(oldest, 7)) \(cell(newest, 7)) \(cell(sender, 7)) \(cell(key, 24)) \(reason)"
        }
        var lines = [row("COUNT", "OLDEST", "NEWEST", "SENDER", "ROUTING KEY", "REASON")]
        for (key, group) in rows {
            lines.append(
                row(
                    "\(group.count)", age(group.oldest), age(group.newest), key.sender ?? "-", key.routingKey,
                    key.reason))
        }
        if otherGroups.count > 0 {
            lines.append(
                row(
                    "\(otherGroups.count)", age(otherGroups.oldest), age(otherGroups.newest), "-", "-",
                    "(in further groups, beyond the first \(maximumGroups))"))
        }
        lines.append(row("\(total.count)", age(total.oldest), age(total.newest), "", "", "(all)"))
        if total.withoutTimestamp > 0 {
            lines.append(
                "\(total.withoutTimestamp) of them have no AMQP timestamp: their age is when the broker "
                    + "dead-lettered them, or unknown")
        }
        return lines
    }

    /// JSON lines: one object per group (its `reason`, `sender`, `routingKey` and counts), then one for the other
    /// groups if any (`"otherGroups": true`), then the total (`"total": true`).
    public func jsonLines() -> [String] {
        func object(_ group: Group) -> [String: Any] {
            var object: [String: Any] = ["count": group.count, "withoutTimestamp": group.withoutTimestamp]
            object["oldest"] = group.oldest.map { $0.formatted(.iso8601) }
            object["newest"] = group.newest.map { $0.formatted(.iso8601) }
            return object
        }
        func line(_ object: [String: Any]) -> String {
            let data =
                (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
                ?? Data("{}".utf8)
            return String(decoding: data, as: UTF8.self)
        }
        var lines: [String] = []
        for (key, group) in rows {
            var entry = object(group)
            entry["reason"] = key.reason
            entry["sender"] = key.sender ?? NSNull()
            entry["routingKey"] = key.routingKey
            lines.append(line(entry))
        }
        if otherGroups.count > 0 {
            var entry = object(otherGroups)
            entry["otherGroups"] = true
            lines.append(line(entry))
        }
        var entry = object(total)
        entry["total"] = true
        lines.append(line(entry))
        return lines
    }
}

/// The delivery tags of a session's consume channel that are not yet settled, in ascending order (the broker numbers
/// a channel's deliveries upwards). It turns "acknowledge these" into the fewest `basic.ack` frames that touch
/// nothing else: one with `multiple` for the longest run of the oldest unsettled tags, then one per remaining tag. An
/// acknowledgement with `multiple` never covers a delivery held, given back or waiting to be requeued.
struct UnsettledTags: Sendable, Hashable {
    private var tags: [UInt64] = []
    /// Tags before this index are settled (a run at the front is cut off lazily, without moving the rest).
    private var start = 0

    var isEmpty: Bool { start == tags.count }
    var count: Int { tags.count - start }

    mutating func received(_ tag: UInt64) {
        tags.append(tag)
    }

    /// The settlements that acknowledge `acknowledged` (ascending, each unsettled), and no other delivery.
    mutating func acknowledge(_ acknowledged: [UInt64]) -> [Settlement] {
        guard !acknowledged.isEmpty else { return [] }
        // The run shared with the front of the unsettled tags: one `basic.ack` with `multiple`.
        var run = 0
        while run < acknowledged.count, start + run < tags.count, tags[start + run] == acknowledged[run] {
            run += 1
        }
        var settlements: [Settlement] = []
        if run > 0 {
            settlements.append(.ack(tag: acknowledged[run - 1], multiple: run > 1))
            start += run
        }
        if run < acknowledged.count {
            settlements.reserveCapacity(settlements.count + acknowledged.count - run)
            for tag in acknowledged[run...] { settlements.append(.ack(tag: tag, multiple: false)) }
            remove(Set(acknowledged[run...]))
        }
        compact()
        return settlements
    }

    /// Settled one by one (requeued, rejected): no longer unsettled.
    mutating func settled(_ settled: [UInt64]) {
        guard !settled.isEmpty else { return }
        remove(Set(settled))
        compact()
    }

    private mutating func remove(_ removed: Set<UInt64>) {
        tags = Array(tags[start...].filter { !removed.contains($0) })
        start = 0
    }

    private mutating func compact() {
        if start == tags.count {
            tags.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 1_024 {
            tags.removeFirst(start)
            start = 0
        }
    }
}

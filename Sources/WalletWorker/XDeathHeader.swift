import AMQPTransport

/// The `x-death` header as RabbitMQ's own dead-lettering reads it.
///
/// When a queue dead-letters a message (a reject without requeue, an expired TTL) RabbitMQ 3.10 updates the
/// message's `x-death` header, and the queue process crashes doing it when the header is not what it wrote itself:
/// not an array (case_clause), an entry that is not a table (function_clause in `rabbit_dead_letter`), or a
/// `count` that is not a number (badarith). A publisher can set any header, so one forged `x-death` could crash the
/// work queue (found by the hostile-input fuzz test: the consumer is cancelled, the session restarts). The worker
/// therefore never leaves a message with a malformed `x-death` to the broker's dead-lettering: a retry copy carries
/// it as `x-original-x-death`, and a message the worker would reject to the broker gets a dead letter of its own.
enum XDeathHeader {
    static let name = "x-death"
    /// Where a retry copy keeps an `x-death` header the broker could not update.
    static let keptAs = "x-original-x-death"

    /// Whether RabbitMQ can dead-letter a message with these headers without crashing the queue.
    static func brokerCanUpdate(_ headers: AMQPTable?) -> Bool {
        guard let headers else { return true }
        for entry in headers.entries where entry.key == name {
            guard isWellFormed(entry.value) else { return false }
        }
        return true
    }

    private static func isWellFormed(_ value: AMQPFieldValue) -> Bool {
        guard case .array(let events) = value else { return false }
        return events.allSatisfy { event in
            guard case .table(let fields) = event else { return false }
            // The broker adds one to the count of the entry for its queue and reason.
            guard let count = fields["count"] else { return true }
            switch count {
            case .int8, .uint8, .int16, .uint16, .int32, .uint32: return true
            case .int64(let value): return value < .max
            case .uint64(let value): return value < UInt64(Int64.max)
            default: return false
            }
        }
    }

    /// The headers with every malformed `x-death` moved to `x-original-x-death`, for a copy the broker will
    /// dead-letter (the retry queue's TTL); unchanged when the broker can update them.
    static func movingMalformed(_ headers: AMQPTable?) -> AMQPTable? {
        guard let headers, !brokerCanUpdate(headers) else { return headers }
        var moved = headers
        moved[keptAs] = headers[name]
        moved.entries = moved.entries.filter { $0.key != name }
        return moved
    }
}

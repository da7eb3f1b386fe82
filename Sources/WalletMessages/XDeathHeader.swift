import AMQPTransport

/// The `x-death` header as RabbitMQ's own dead-lettering reads it.
///
/// When a queue dead-letters a message (a reject without requeue, an expired TTL) RabbitMQ 3.10 updates the
/// message's `x-death` header (`rabbit_dead_letter:update_x_death_header`). A header that is not an array it simply
/// replaces with a fresh one. But an array holding an entry that is not a table (function_clause), or an entry whose
/// `count` is not an integer (a string, a decimal, a float: badarith) crashes the queue process. A publisher can set
/// any header, so one forged `x-death` could crash the work queue (found by the hostile-input fuzz test: the
/// consumer is cancelled, the session restarts). The worker therefore never leaves a message with such an
/// `x-death` to the broker's dead-lettering: a retry copy carries it as `x-original-x-death`, and a message it would
/// reject to the broker is read whole (`bodyMustBeKept`) and dead-lettered by the worker itself.
public enum XDeathHeader {
    public static let name = "x-death"
    /// Where a retry copy keeps an `x-death` header the broker could not update.
    public static let keptAs = "x-original-x-death"

    /// Whether RabbitMQ can dead-letter a message with these headers without crashing the queue.
    public static func brokerCanUpdate(_ headers: AMQPTable?) -> Bool {
        guard let headers else { return true }
        for entry in headers.entries where entry.key == name {
            guard case .array(let events) = entry.value else { continue }  // replaced whole by the broker
            guard events.allSatisfy(isUpdatable) else { return false }
        }
        return true
    }

    /// Whether a delivery over the read ceiling must still be read whole: the broker could not dead-letter it, so
    /// the worker must, with its body (CONTRACT.md §8: the body untouched). Passed to the transport, which decides
    /// from the content header before it reads the body.
    public static func bodyMustBeKept(_ properties: AMQPMessageProperties) -> Bool {
        !brokerCanUpdate(properties.headers)
    }

    private static func isUpdatable(_ event: AMQPFieldValue) -> Bool {
        guard case .table(let fields) = event else { return false }
        // The broker adds one to the count of the entry for its queue and reason.
        guard let count = fields["count"] else { return true }
        switch count {
        case .int8, .uint8, .int16, .uint16, .int32, .uint32, .int64, .uint64: return true
        default: return false
        }
    }

    /// The headers with every `x-death` the broker could not update moved to `x-original-x-death`, for a copy the
    /// broker will dead-letter (the retry queue's TTL); unchanged when the broker can update them.
    public static func movingMalformed(_ headers: AMQPTable?) -> AMQPTable? {
        guard let headers, !brokerCanUpdate(headers) else { return headers }
        var moved = headers
        moved[keptAs] = headers[name]
        moved.entries = moved.entries.filter { $0.key != name }
        return moved
    }
}

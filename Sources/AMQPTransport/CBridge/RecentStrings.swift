internal import CRabbitMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The last few distinct short strings read off the wire, handed out again when the same bytes come back.
///
/// Every delivery repeats its consumer tag, exchange and content type: as new `String`s, each longer than 15 bytes
/// (Swift's inline limit) costs a heap allocation, several per delivery. An equal string already made shares its
/// storage instead. Bytes are compared in full, so the result is always exactly the bytes received. Holds at most
/// `capacity` strings; owned by one connection's I/O thread.
struct RecentStrings {
    static let capacity = 8
    private var entries: [String] = []
    private var nextReplaced = 0

    init() {
        entries.reserveCapacity(Self.capacity)
    }

    /// `bytes` as a string, UTF-8 validated; nil when they are not UTF-8 (nothing is remembered then).
    mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        // Short strings are stored inline: making one allocates nothing, and comparing would cost more.
        guard bytes.count > 15, let start = bytes.baseAddress else { return String(validating: bytes, as: UTF8.self) }
        for entry in entries where entry.utf8.count == bytes.count {
            let same = entry.utf8.withContiguousStorageIfAvailable { stored in
                stored.baseAddress.map { memcmp($0, start, bytes.count) == 0 } ?? false
            }
            if same == true { return entry }
        }
        guard let made = String(validating: bytes, as: UTF8.self) else { return nil }
        if entries.count < Self.capacity {
            entries.append(made)
        } else {
            entries[nextReplaced] = made
            nextReplaced = (nextReplaced + 1) % Self.capacity
        }
        return made
    }

    /// Librabbitmq's bytes as a string, invalid UTF-8 repaired as `amqp_bytes_t.string` does.
    mutating func text(_ bytes: amqp_bytes_t) -> String {
        string(bytes.buffer) ?? bytes.string
    }
}

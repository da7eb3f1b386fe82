import Foundation

/// Checks a direct reply-to address (`amq.rabbitmq.reply-to.<pid>.<key>`) before the worker publishes to it.
///
/// RabbitMQ decodes `<pid>` (base64 of an Erlang term) with `binary_to_term` when a message is published to the
/// address; a malformed one (`amq.rabbitmq.reply-to.g2gCZA==.AAAAAA==`, a truncated tuple) crashes the publishing
/// channel and closes the whole connection with 541 INTERNAL_ERROR. The address comes from the inbound message's
/// `reply_to`, so anyone can send one: the worker publishes a copy only to an address whose `<pid>` is exactly one
/// complete Erlang pid term (`NEW_PID_EXT` as RabbitMQ 3.10 to 4.x issue them, e.g. `g1h2AA5yZXBseUA2NjYy...`, or
/// the older `PID_EXT`) and whose `<key>` is base64.
enum DirectReplyToAddress {
    static let prefix = "amq.rabbitmq.reply-to."

    /// False for an address with the direct reply-to prefix that RabbitMQ could not decode; true otherwise.
    static func isPublishable(_ address: String) -> Bool {
        guard address.hasPrefix(prefix) else { return true }
        let parts = address.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[1].isEmpty, Data(base64Encoded: String(parts[1])) != nil,
            let term = Data(base64Encoded: String(parts[0]))
        else { return false }
        var reader = ExternalTermReader(bytes: Array(term))
        return reader.readsWholePidTerm()
    }
}

/// Just enough of Erlang's external term format to tell a complete pid from anything else.
private struct ExternalTermReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func readsWholePidTerm() -> Bool {
        guard take(1) == [131], let tag = take(1)?.first else { return false }
        let valid: Bool
        switch tag {
        case 88, 103: valid = readPid(new: tag == 88)  // NEW_PID_EXT, PID_EXT
        default: valid = false
        }
        return valid && offset == bytes.count
    }

    private mutating func readPid(new: Bool) -> Bool {
        // Node atom, then id, serial (4 bytes each) and creation (4 bytes new, 1 byte old).
        readAtom() && take(new ? 12 : 9) != nil
    }

    private mutating func readAtom() -> Bool {
        guard let tag = take(1)?.first else { return false }
        switch tag {
        case 100, 118: return readLength(2).flatMap { take($0) } != nil  // ATOM_EXT, ATOM_UTF8_EXT
        case 115, 119: return readLength(1).flatMap { take($0) } != nil  // SMALL_ATOM_EXT, SMALL_ATOM_UTF8_EXT
        default: return false
        }
    }

    private mutating func readLength(_ width: Int) -> Int? {
        take(width)?.reduce(0) { $0 << 8 | Int($1) }
    }

    private mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, bytes.count - offset >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }
}

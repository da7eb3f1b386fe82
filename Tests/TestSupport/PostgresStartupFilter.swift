#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A PostgreSQL connection's start as a pooler that drops start-up parameters passes it on (PgBouncer with
/// `ignore_startup_parameters`): a `FaultyRelay` handshake that takes the named parameters out of the client's
/// StartupMessage. Plain connections only (`sslmode=disable`): TLS would hide the message.
public enum PostgresStartupFilter {
    /// The request codes a client may send before its StartupMessage (SSLRequest, GSSENCRequest): passed on as they
    /// are; the server's one-byte answer goes back through the relay's other direction.
    private static let requestCodes: Set<UInt32> = [80_877_103, 80_877_104]

    public static func dropping(_ names: Set<String>) -> FaultyRelay.Handshake {
        { client, server in
            while true {
                guard let header = readExactly(client, 8) else { return false }
                let length = Int(bigEndian32(header, at: 0))
                if length == 8, requestCodes.contains(bigEndian32(header, at: 4)) {
                    guard writeAll(server, header) else { return false }
                    continue
                }
                guard length > 8, let body = readExactly(client, length - 8) else { return false }
                // Protocol version (in the header), then name, NUL, value, NUL, ..., and a final NUL.
                var fields = body.split(separator: 0, omittingEmptySubsequences: false).map { Array($0) }
                if fields.last?.isEmpty == true { fields.removeLast() }
                if fields.last?.isEmpty == true { fields.removeLast() }
                var kept: [UInt8] = []
                var index = 0
                while index + 1 < fields.count {
                    if !names.contains(String(decoding: fields[index], as: UTF8.self)) {
                        kept += fields[index] + [0] + fields[index + 1] + [0]
                    }
                    index += 2
                }
                kept.append(0)
                let newLength = UInt32(8 + kept.count)
                let message = withUnsafeBytes(of: newLength.bigEndian, Array.init) + header[4..<8] + kept
                return writeAll(server, message)
            }
        }
    }

    private static func bigEndian32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    private static func readExactly(_ socket: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes[done...].withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
            guard result > 0 else { return nil }
            done += result
        }
        return bytes
    }

    private static func writeAll(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let result = bytes[done...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard result > 0 else { return false }
            done += result
        }
        return true
    }
}

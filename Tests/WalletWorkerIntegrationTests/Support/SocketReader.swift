#if canImport(Glibc)
    import Glibc
#endif

/// Buffered reads of HTTP/1.1 from a blocking socket: the tests' HTTP client (`httpGet`) and the OTLP receiver.
struct SocketReader {
    let descriptor: Int32
    /// Bytes read and not yet taken.
    var buffer: [UInt8]
    /// `errno` of the read that failed, if one did (a receive timeout among them); nil at a clean end of the stream.
    private(set) var failure: Int32?

    /// `buffered`: bytes already read, taken before the socket's (a test's whole input, with descriptor -1).
    init(descriptor: Int32, buffered: [UInt8] = []) {
        self.descriptor = descriptor
        self.buffer = buffered
    }

    /// Reads more; false at the end of the stream or on an error (then `failure`).
    private mutating func fill() -> Bool {
        guard descriptor >= 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer += chunk[0..<count]
                return true
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { failure = errno }
            return false
        }
    }

    private mutating func line(terminator: [UInt8]) -> [UInt8]? {
        while true {
            if let range = buffer.firstRange(of: terminator) {
                let line = Array(buffer[..<range.lowerBound])
                buffer.removeSubrange(..<range.upperBound)
                return line
            }
            guard fill() else { return nil }
        }
    }

    /// The request or status line and the headers, without the blank line.
    mutating func readHead() -> String? {
        line(terminator: Array("\r\n\r\n".utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    mutating func read(count: Int) -> [UInt8]? {
        while buffer.count < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeSubrange(..<count)
        return bytes
    }

    /// Everything up to the end of the stream (a response sent with `Connection: close`); nil if a read failed.
    mutating func readToEnd() -> [UInt8]? {
        while fill() {}
        guard failure == nil else { return nil }
        defer { buffer = [] }
        return buffer
    }

    /// A chunked body's data (RFC 9112, 7.1: a hexadecimal size line, the chunk and CRLF, until a chunk of size 0),
    /// or nil when it is cut short or malformed. The chunks are cut by bytes, perhaps inside a character.
    mutating func readChunkedBody() -> [UInt8]? {
        var body: [UInt8] = []
        while true {
            guard let sizeLine = line(terminator: Array("\r\n".utf8)) else { return nil }
            let sizeText = String(decoding: sizeLine, as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                return nil
            }
            if size == 0 {
                _ = line(terminator: Array("\r\n".utf8))  // the end, or trailers (none are sent here)
                return body
            }
            guard let chunk = read(count: size), read(count: 2) == Array("\r\n".utf8) else { return nil }
            body += chunk
        }
    }
}

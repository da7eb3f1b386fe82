import Foundation

#if canImport(Glibc)
    import Glibc
#endif

public struct RawHTTPConnectionError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A TCP connection to 127.0.0.1 with socket timeouts, and no HTTP client logic beyond reading one response by its
/// Content-Length. Its sends, reads and waits block a thread of their own (`offThePool`), never the cooperative
/// pool's; one caller at a time.
public final class RawHTTPConnection: @unchecked Sendable {
    private let descriptor: Int32
    private var isClosed = false
    private var buffered: [UInt8] = []

    public init(
        port: Int, sendTimeout: Duration = .seconds(3), receiveTimeout: Duration = .seconds(3),
        receiveBufferBytes: Int? = nil
    ) throws {
        do {
            descriptor = try connectToLoopback(
                port: port, sendTimeout: sendTimeout, receiveTimeout: receiveTimeout,
                receiveBufferBytes: receiveBufferBytes)
        } catch {
            throw RawHTTPConnectionError("\(error)")
        }
    }

    deinit { close() }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(descriptor)
    }

    /// Sends what the kernel takes before the send timeout or an error; the number of bytes sent.
    public func send(_ bytes: [UInt8]) async -> Int {
        await offThePool { self.sendBlocking(bytes) }
    }

    public func sendAll(_ text: String) async throws {
        let bytes = Array(text.utf8)
        try await offThePool {
            guard self.sendBlocking(bytes) == bytes.count else {
                throw RawHTTPConnectionError("send failed: errno \(errno)")
            }
        }
    }

    /// One response: its status and body (by Content-Length).
    public func readResponse() async throws -> (status: Int, body: String) {
        try await offThePool { try self.readResponseBlocking() }
    }

    /// Everything until the server closes the connection (or resets it): the text, and whether it closed before
    /// `timeout`.
    public func readToEnd(timeout: Duration) async -> (text: String, closed: Bool) {
        await offThePool { self.readToEndBlocking(timeout: timeout) }
    }

    /// Whether the server closed (or reset) the connection within `timeout`, without reading what it sent.
    public func waitForHangUp(timeout: Duration) async -> Bool {
        await offThePool { self.waitForHangUpBlocking(timeout: timeout) }
    }

    private func sendBlocking(_ bytes: [UInt8]) -> Int {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                sent += count
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return sent
    }

    /// One chunk from the socket: nil at the end of the stream, on a reset or on the receive timeout.
    private func receive() -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 { return Array(chunk[0..<count]) }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }

    private func readResponseBlocking() throws -> (status: Int, body: String) {
        let separator = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = buffered.indices.dropLast(3).first { buffered[$0..<$0 + 4].elementsEqual(separator) }
            if headerEnd == nil {
                guard let chunk = receive() else {
                    throw RawHTTPConnectionError("no complete response: \(String(decoding: buffered, as: UTF8.self))")
                }
                buffered += chunk
            }
        }
        let head = String(decoding: buffered[..<headerEnd!], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let parts = lines.first?.split(separator: " ") ?? []
        guard parts.count >= 2, let status = Int(parts[1]) else {
            throw RawHTTPConnectionError("bad status line: \(head)")
        }
        let length =
            lines.dropFirst().compactMap { line -> Int? in
                let field = line.split(separator: ":", maxSplits: 1)
                guard field.count == 2, field[0].lowercased() == "content-length" else { return nil }
                return Int(field[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        let bodyStart = headerEnd! + 4
        while buffered.count < bodyStart + length {
            guard let chunk = receive() else { throw RawHTTPConnectionError("short body after \(head)") }
            buffered += chunk
        }
        let body = String(decoding: buffered[bodyStart..<bodyStart + length], as: UTF8.self)
        buffered.removeFirst(bodyStart + length)
        return (status, body)
    }

    private func readToEndBlocking(timeout: Duration) -> (text: String, closed: Bool) {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var received = buffered
        buffered = []
        while clock.now < deadline {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0..<count]
            } else if count == 0 || errno == ECONNRESET {
                return (String(decoding: received, as: UTF8.self), true)
            } else if errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK {
                return (String(decoding: received, as: UTF8.self), true)
            }
        }
        return (String(decoding: received, as: UTF8.self), false)
    }

    private func waitForHangUpBlocking(timeout: Duration) -> Bool {
        // POLLRDHUP (0x2000, Linux): the peer closed its side; POLLHUP and POLLERR (a reset) always count.
        let peerClosed = Int16(0x2000)
        var entry = pollfd(fd: descriptor, events: peerClosed, revents: 0)
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while clock.now < deadline {
            let left = deadline - clock.now
            let milliseconds = Int32(
                left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&entry, 1, max(milliseconds, 1))
            if ready > 0 && entry.revents & (peerClosed | Int16(POLLHUP) | Int16(POLLERR)) != 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
        return false
    }
}

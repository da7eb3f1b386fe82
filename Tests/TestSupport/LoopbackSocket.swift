import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP socket bound to an ephemeral port on 127.0.0.1. Listening, it holds the port (a port some other process
/// has taken); closed at once, it names a port nothing listens on (a server that is down).
public final class LoopbackSocket: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init(listening: Bool) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw LoopbackSocketError(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && (!listening || listen(descriptor, 1) == 0)
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(descriptor)
            throw LoopbackSocketError(description: "bind\(listening ? "/listen" : "") on 127.0.0.1: errno \(errno)")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() { Glibc.close(descriptor) }
}

public struct LoopbackSocketError: Error, CustomStringConvertible {
    public var description: String
}

/// A listening TCP socket on 127.0.0.1 at a port the kernel picks: its descriptor and the port.
public func listenOnLoopback() throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw LoopbackSocketError(description: "socket: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0  // the kernel picks a free port
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            bind(descriptor, address, length) == 0 && listen(descriptor, 16) == 0
                && getsockname(descriptor, address, &length) == 0
        }
    }
    guard bound else {
        _ = systemClose(descriptor)
        throw LoopbackSocketError(description: "bind/listen on 127.0.0.1: errno \(errno)")
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

/// close(2), spelled so that types with their own `close()` can call it.
public func systemClose(_ descriptor: Int32) -> Int32 {
    close(descriptor)
}

/// A TCP connection to 127.0.0.1:`port` with send and receive timeouts: its descriptor, for the caller to close.
/// - Parameter receiveBufferBytes: the socket's receive buffer (`SO_RCVBUF`, set before connecting, so the window
///   the server sees is that small); nil for the kernel's, which grows to megabytes on loopback.
public func connectToLoopback(
    port: Int, sendTimeout: Duration, receiveTimeout: Duration, receiveBufferBytes: Int? = nil
) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else {
        throw LoopbackSocketError(description: "socket: \(String(cString: strerror(errno)))")
    }
    setSocketTimeout(descriptor, SO_SNDTIMEO, sendTimeout)
    setSocketTimeout(descriptor, SO_RCVTIMEO, receiveTimeout)
    if var bytes = receiveBufferBytes.map(Int32.init) {
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &bytes, socklen_t(MemoryLayout<Int32>.size))
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else {
        let error = String(cString: strerror(errno))
        _ = systemClose(descriptor)
        throw LoopbackSocketError(description: "connect to 127.0.0.1:\(port): \(error)")
    }
    return descriptor
}

private func setSocketTimeout(_ descriptor: Int32, _ option: Int32, _ timeout: Duration) {
    let (seconds, attoseconds) = timeout.components
    var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
}

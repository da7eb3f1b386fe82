import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP listener on 127.0.0.1 (a free port) that accepts connections and never sends a byte: a peer that is
/// reachable but never answers the AMQP handshake. Stands in for an unreachable broker without sending
/// packets anywhere but loopback.
final class SilentListener: Sendable {
    let port: Int
    private let listener: Int32
    private let accepted = Mutex<[Int32]>([])

    init() throws {
        (listener, port) = try listenOnLoopback()

        let thread = Thread { [self] in acceptUntilShutDown() }
        thread.name = "silent-listener:\(port)"
        thread.start()
    }

    private func acceptUntilShutDown() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }  // shut down (or failed): stop accepting
            accepted.withLock { $0.append(connection) }
        }
    }

    /// Stops accepting (shutdown wakes the blocked accept) and closes every accepted connection.
    func close() {
        _ = shutdown(listener, Int32(SHUT_RDWR))
        _ = systemClose(listener)
        for connection in accepted.withLock({ $0 }) { _ = systemClose(connection) }
    }

    struct SocketFailure: Error, CustomStringConvertible {
        var call: String
        var code = errno
        var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }
}

/// A listening TCP socket on 127.0.0.1 at a port the kernel picks: its descriptor and the port.
func listenOnLoopback() throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw SilentListener.SocketFailure(call: "socket") }
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
        throw SilentListener.SocketFailure(call: "bind/listen")
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

/// close(2), spelled so that types with their own `close()` can call it.
func systemClose(_ descriptor: Int32) -> Int32 {
    close(descriptor)
}

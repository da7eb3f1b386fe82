import Foundation
import Locking
import TestSupport

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
    private let accepted = Locked<[Int32]>([])

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

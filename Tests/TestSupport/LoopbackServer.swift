import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP server on 127.0.0.1 for the tests' scripted peers (an OTLP collector, a receiver): one thread accepts, one
/// thread per connection runs the peer's `serve` with the connection's descriptor, and `close()` ends both.
///
/// The tests of a package share one process, and a closed descriptor's number is soon another test's socket: a
/// descriptor is shut down or closed only under the lock that lists it as this server's, never after. `close()`
/// shuts the listener and the connections down; the threads that own them close them.
public final class LoopbackServer: Sendable {
    public let port: Int
    private let listener: Int32
    private let state = Locked((connections: Set<Int32>(), isClosing: false, isListenerClosed: false))

    /// Listens; nothing is accepted until `start`.
    public init() throws {
        (listener, port) = try listenOnLoopback()
    }

    /// Accepts connections and serves each on a thread of its own; `serve` returns when its peer is done (or the
    /// connection is shut down by `close()`), and the server then closes the descriptor.
    public func start(serving serve: @escaping @Sendable (Int32) -> Void) {
        Thread { [self] in acceptUntilClosed(serve) }.start()
    }

    /// Stops accepting and ends the connections being served.
    public func close() {
        state.withLock { state in
            state.isClosing = true
            if !state.isListenerClosed { _ = shutdown(listener, Int32(SHUT_RDWR)) }
            for descriptor in state.connections { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptUntilClosed(_ serve: @escaping @Sendable (Int32) -> Void) {
        while true {
            let descriptor = accept(listener, nil, nil)
            if descriptor < 0 && errno == EINTR { continue }
            let serving = state.withLock { state -> Bool in
                guard descriptor >= 0, !state.isClosing else {
                    if descriptor >= 0 { _ = systemClose(descriptor) }
                    state.isListenerClosed = true
                    _ = systemClose(listener)
                    return false
                }
                state.connections.insert(descriptor)
                return true
            }
            guard serving else { return }
            Thread { [self] in
                serve(descriptor)
                state.withLock { state in
                    state.connections.remove(descriptor)
                    _ = systemClose(descriptor)
                }
            }.start()
        }
    }
}

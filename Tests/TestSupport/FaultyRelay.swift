import Foundation
import Locking

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A TCP relay on 127.0.0.1 in front of a test server (the broker, PostgreSQL) that can fail on command:
/// `freeze()` stops moving bytes while keeping the sockets open (a server or network that went silent), `sever()`
/// closes both sides (a lost connection), `refuse()` severs and closes every new connection at once until
/// `accept()` (a server that is down, then back). Lets tests break connections without touching the shared server.
public final class FaultyRelay: Sendable {
    public let port: Int
    private let listener: Int32
    private let upstreamHost: String
    private let upstreamPort: Int
    private let state = Locked(State())

    private struct State {
        var frozen = false
        var severed = false
        var refusing = false
        /// Set by `close()`; the accept thread then closes the listener (and only it, under the lock: the tests share
        /// the process, and a closed descriptor's number is soon another test's socket, which an `accept` on the
        /// old number would take connections from).
        var closing = false
        var listenerClosed = false
        /// The relayed connections' sockets still open. A socket leaves this list only under the lock, and is
        /// closed only after it left (`directionEnded`): every `shutdown` below runs under the lock on a listed
        /// socket, so none reaches a number the system has given to another test's socket.
        var sockets: [Int32] = []
        /// Per relayed connection (by its client socket), the directions still copying: its two sockets are closed
        /// when the last one ends.
        var directionsRunning: [Int32: Int] = [:]
        /// Sockets frozen alone (`freezeExisting`): new connections still pass.
        var frozenSockets: Set<Int32> = []
    }

    /// Runs first on each new connection, in the client-to-server direction, before bytes are copied as they are:
    /// reads what the client sends first and writes to the server what it should see instead; false closes the
    /// connection (`PostgresStartupFilter`). The server's answers are copied meanwhile.
    public typealias Handshake = @Sendable (_ client: Int32, _ server: Int32) -> Bool
    private let handshake: Handshake?

    public init(upstreamHost: String, upstreamPort: Int, handshake: Handshake? = nil) throws {
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.handshake = handshake
        (listener, port) = try listenOnLoopback()
        Thread { [self] in acceptUntilShutDown() }.start()
    }

    /// Stops relaying in both directions; the sockets stay open, so neither side sees a close.
    public func freeze() {
        state.withLock { $0.frozen = true }
    }

    /// Stops relaying on the connections open now, keeping their sockets open, while new connections pass: a black
    /// hole on one path, as when a NAT or a load balancer drops a flow's state and a reconnect takes a fresh one.
    public func freezeExisting() {
        state.withLock { $0.frozenSockets.formUnion($0.sockets) }
    }

    /// Shuts down the connections `freezeExisting` froze: each side reads end-of-file.
    public func severFrozen() {
        state.withLock { state in
            for socket in state.frozenSockets where state.sockets.contains(socket) {
                _ = shutdown(socket, Int32(SHUT_RDWR))
            }
            state.frozenSockets = []
        }
    }

    /// Shuts down every relayed connection: each side reads end-of-file.
    public func sever() {
        state.withLock { state in
            state.severed = true
            for socket in state.sockets { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    /// Severs every relayed connection and closes new ones as they come, until `accept()`.
    public func refuse() {
        state.withLock { state in
            state.refusing = true
            for socket in state.sockets { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    /// Relays new connections again after `refuse()`.
    public func accept() {
        state.withLock { $0.refusing = false }
    }

    /// Severs everything and stops accepting.
    public func close() {
        state.withLock { state in
            state.closing = true
            if !state.listenerClosed { _ = shutdown(listener, Int32(SHUT_RDWR)) }
        }
        sever()
    }

    private func acceptUntilShutDown() {
        while true {
            let client = Glibc.accept(listener, nil, nil)
            let closing = state.withLock { state -> Bool in
                guard client < 0 || state.closing else { return false }
                if client >= 0 { _ = systemClose(client) }
                state.listenerClosed = true
                _ = systemClose(listener)
                return true
            }
            if closing { return }
            guard !state.withLock({ $0.refusing }), let upstream = connectUpstream() else {
                _ = systemClose(client)
                continue
            }
            state.withLock {
                $0.sockets += [client, upstream]
                $0.directionsRunning[client] = 2
            }
            Thread { [self] in
                defer { directionEnded(client: client, upstream: upstream) }
                if let handshake, !handshake(client, upstream) {
                    _ = shutdown(client, Int32(SHUT_RDWR))
                    _ = shutdown(upstream, Int32(SHUT_RDWR))
                    return
                }
                relay(from: client, to: upstream)
            }.start()
            Thread { [self] in
                defer { directionEnded(client: client, upstream: upstream) }
                relay(from: upstream, to: client)
            }.start()
        }
    }

    /// One direction of a relayed connection stopped (both its sockets are shut down by then); after the second, the
    /// sockets leave the list and are closed, so a test process that relays many connections holds no descriptor
    /// for them.
    private func directionEnded(client: Int32, upstream: Int32) {
        state.withLock { state in
            let running = (state.directionsRunning[client] ?? 1) - 1
            guard running == 0 else {
                state.directionsRunning[client] = running
                return
            }
            state.directionsRunning[client] = nil
            state.sockets.removeAll { $0 == client || $0 == upstream }
            state.frozenSockets.subtract([client, upstream])
            _ = systemClose(client)
            _ = systemClose(upstream)
        }
    }

    private func connectUpstream() -> Int32? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(upstreamHost, String(upstreamPort), &hints, &results) == 0, let first = results else {
            return nil
        }
        defer { freeaddrinfo(results) }
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            let descriptor = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if descriptor >= 0 {
                if connect(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return descriptor }
                _ = systemClose(descriptor)
            }
            candidate = info.pointee.ai_next
        }
        return nil
    }

    /// Copies bytes one way until either side closes; while frozen, reads nothing.
    private func relay(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        defer {
            _ = shutdown(source, Int32(SHUT_RDWR))
            _ = shutdown(destination, Int32(SHUT_RDWR))
        }
        while true {
            var descriptor = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 20) >= 0 else { return }
            // Checked after the wait, right before reading: bytes sent after `freeze()` returned are never relayed.
            let (frozen, severed) = state.withLock {
                ($0.frozen || $0.frozenSockets.contains(source) || $0.frozenSockets.contains(destination), $0.severed)
            }
            if severed { return }
            if frozen {
                usleep(10_000)  // hold the bytes in the kernel until severed
                continue
            }
            guard descriptor.revents != 0 else { continue }
            let count = read(source, &buffer, buffer.count)
            guard count > 0 else { return }
            var written = 0
            while written < count {
                // `send` with MSG_NOSIGNAL: a side shut down under the write is EPIPE, not a SIGPIPE that ends the tests.
                let result = buffer[written..<count].withUnsafeBytes {
                    send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard result > 0 else { return }
                written += result
            }
        }
    }
}

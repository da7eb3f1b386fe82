#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a TCP connect failed, in the system's words. librabbitmq 0.11 reports every failed connect as
/// `AMQP_STATUS_SOCKET_ERROR` ("a socket error occurred") and reads the socket's error with `SO_ERROR` without
/// passing it on, so a refused connection cannot be told from an unreachable network. After such a failure the
/// transport connects once more itself, only to learn the errno: a refused or unreachable peer answers at once.
enum ConnectProbe {
    /// The errno of a connect to `host:port` (the last address tried), or nil when it connected or said nothing
    /// within `timeout`.
    static func failure(host: String, port: Int, timeout: Duration) -> Int32? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var failure: Int32?
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let current = address {
            address = current.pointee.ai_next
            let descriptor = socket(current.pointee.ai_family, current.pointee.ai_socktype, current.pointee.ai_protocol)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            if connect(descriptor, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 { return nil }
            guard errno == EINPROGRESS else {
                failure = errno
                continue
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(
                clamping: timeout.components.seconds * 1_000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&poller, 1, milliseconds) == 1 else { continue }
            var code: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { continue }
            if code == 0 { return nil }
            failure = code
        }
        return failure
    }
}

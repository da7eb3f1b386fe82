import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle
import Synchronization

/// The operations endpoint: `GET /healthz` (live), `GET /readyz` (consuming), `GET /metrics` (Prometheus text).
/// A service of its own, stopped after the worker so `/metrics` can be scraped during the drain.
///
/// It serves probes and scrapers, so no client may take more than a bounded share of the process (`Limits`):
/// a connection answers one request at a time and reads the next only once the response is written, a connection
/// that makes no progress is closed, and connections beyond a cap are refused.
public final class OperationsServer: Service {
    /// What one client may hold of the endpoint.
    public struct Limits: Sendable {
        /// Connections served at once. One more is accepted, answered `503` and closed at once (a scraper then
        /// says why, rather than timing out in the backlog), and counted in `wallet_http_connections_refused_total`.
        /// Default: `64`.
        public var maxConnections: Int
        /// A connection on which nothing progresses for this long (no complete request arrives, or its client does
        /// not read the response) is closed: idle keep-alives, slow senders and clients that never read all end.
        /// Default: `10 s`.
        public var idleTimeout: Duration
        /// The request line and headers of one request together; a longer request is answered `431` and the
        /// connection closed. Default: `8192`.
        public var maxHeaderBytes: Int

        public init(maxConnections: Int = 64, idleTimeout: Duration = .seconds(10), maxHeaderBytes: Int = 8 * 1024) {
            self.maxConnections = maxConnections
            self.idleTimeout = idleTimeout
            self.maxHeaderBytes = maxHeaderBytes
        }
    }

    private let host: String
    private let port: Int
    private let health: WorkerHealth
    private let metrics: WorkerMetrics
    private let limits: Limits
    private let logger: Logger
    /// The socket and its port once listening, and the callers of `listeningPort()` waiting for it.
    private let listening = Mutex<(channel: (any Channel)?, port: Int?, waiters: [CheckedContinuation<Int, Never>])>(
        (nil, nil, []))

    public init(
        host: String, port: Int, health: WorkerHealth, metrics: WorkerMetrics, limits: Limits = Limits(),
        logger: Logger
    ) {
        self.host = host
        self.port = port
        self.health = health
        self.metrics = metrics
        self.limits = limits
        self.logger = logger
    }

    /// The port it listens on (useful with port 0), once it is listening.
    public func listeningPort() async -> Int {
        await withCheckedContinuation { continuation in
            let port = listening.withLock { listening -> Int? in
                if listening.port == nil { listening.waiters.append(continuation) }
                return listening.port
            }
            if let port { continuation.resume(returning: port) }
        }
    }

    /// Binds the port, once: `WorkerApplication.run()` calls it before any service starts, so that a port taken
    /// ends the start (status 1) before the worker takes a message; `run()` binds here when nobody did.
    public func listen() async throws {
        guard listening.withLock({ $0.channel == nil }) else { return }
        let channel = try await bind()
        let port = channel.localAddress?.port ?? port
        let waiters = listening.withLock { listening in
            listening.channel = channel
            listening.port = port
            defer { listening.waiters = [] }
            return listening.waiters
        }
        waiters.forEach { $0.resume(returning: port) }
        logger.info("operations endpoint listening", metadata: ["address": "http://\(host):\(port)"])
    }

    public func run() async throws {
        try await listen()
        guard let channel = listening.withLock({ $0.channel }) else { return }
        // Serve until graceful shutdown (after the worker has drained: services stop in reverse order).
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
    }

    /// Each connection's socket send buffer: a few `/metrics` responses.
    static let sendBufferBytes: SocketOptionValue = 64 * 1024

    /// The listening socket, or a `ConfigurationError` naming the settings to change.
    private func bind() async throws -> any Channel {
        let health = health
        let metrics = metrics
        let limits = limits
        let slots = ConnectionSlots(limit: limits.maxConnections, registry: metrics.registry)
        let decoderLimits = {
            var decoderLimits = NIOHTTPDecoderLimitConfiguration()
            decoderLimits.maxHeaderFieldSize = limits.maxHeaderBytes
            decoderLimits.maxHeaderListSize = limits.maxHeaderBytes  // NIO counts the request line's URL here too
            return decoderLimits
        }()
        do {
            return try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // The handler asks for input itself, only when it has nothing left to answer (backpressure), and
                // one read at a time: what a client pipelines waits in its own socket buffer, not in our memory.
                .childChannelOption(.autoRead, value: false)
                .childChannelOption(.maxMessagesPerRead, value: 1)
                // A bounded send buffer (the kernel doubles it): a client that does not read holds at most this
                // much of our responses, and its writes stop making progress soon, so the idle deadline ends it. On
                // loopback the kernel grows a buffer to megabytes, and the endpoint went on rendering `/metrics`
                // into it, each write progress, for a minute under load before the deadline could start.
                .childChannelOption(.socketOption(.so_sndbuf), value: Self.sendBufferBytes)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        guard slots.take() else {
                            try pipeline.addHandler(ConnectionRefusal())
                            return
                        }
                        channel.closeFuture.whenComplete { _ in slots.release() }
                        // Own pipelining (one request at a time) and own protocol errors (431 for a long header).
                        try pipeline.configureHTTPServerPipeline(
                            withPipeliningAssistance: false, withErrorHandling: false,
                            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
                        try pipeline.addHandler(
                            OperationsHandler(
                                health: health, metrics: metrics, idleTimeout: TimeAmount(limits.idleTimeout)))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            // Typically the port is taken (another worker, a sidecar): say which setting to change.
            throw ConfigurationError(
                "the operations endpoint cannot listen on \(host):\(port) (--http-host, --http-port): \(error)")
        }
    }
}

/// The open connections against `Limits.maxConnections`, taken by each new connection on whichever event loop
/// serves it; `wallet_http_connections` and `wallet_http_connections_refused_total` show them.
final class ConnectionSlots: Sendable {
    private let open = Atomic<Int>(0)
    private let limit: Int
    private let openGauge: Gauge
    private let refused: Counter

    init(limit: Int, registry: PrometheusCollectorRegistry) {
        self.limit = limit
        openGauge = registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "wallet", metricName: "http_connections", unitName: "",
                helpText: "Connections open to the operations endpoint"))
        refused = registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "wallet", metricName: "http_connections_refused", unitName: "total",
                helpText: "Connections to the operations endpoint refused (503) because the connection cap was reached")
        )
    }

    /// A slot for a new connection, or false (counted) when all are taken.
    func take() -> Bool {
        guard open.wrappingAdd(1, ordering: .relaxed).newValue <= limit else {
            open.wrappingSubtract(1, ordering: .relaxed)
            refused.increment()
            return false
        }
        openGauge.increment()
        return true
    }

    func release() {
        open.wrappingSubtract(1, ordering: .relaxed)
        openGauge.decrement()
    }
}

/// A connection beyond the cap: a short 503 and close, without reading anything from it.
private final class ConnectionRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func channelActive(context: ChannelHandlerContext) {
        let body = "too many connections to the operations endpoint\n"
        let response =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response)))
            .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

/// Answers the requests of one connection in order, one at a time, and reads more from the client only when it
/// has nothing left to answer. A client that pipelines requests without reading the responses therefore holds
/// one response in our memory, whatever it sends; the idle deadline then closes its connection.
private final class OperationsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// What a request asks for, decided when it arrives: requests pipelined within one read wait as a few bytes each.
    private enum Route {
        case live, ready, metrics, notFound, methodNotAllowed
    }

    private enum Pending {
        case request(route: Route, version: HTTPVersion, keepAlive: Bool, isHead: Bool)
        /// The client's bytes are not a request we accept (400), or its header is too long (431): answered in turn,
        /// then the connection closes.
        case protocolError(HTTPResponseStatus)
    }

    private let health: WorkerHealth
    private let metrics: WorkerMetrics
    private let idleTimeout: TimeAmount
    /// The request whose head has arrived and whose end has not.
    private var receiving: Pending?
    private var pending = CircularBuffer<Pending>()
    private var responding = false
    private var proceeding = false
    private var closed = false
    /// The decoder failed: nothing more is read; the error's response is the last.
    private var inputFailed = false
    private var idleDeadline: Scheduled<Void>?

    init(health: WorkerHealth, metrics: WorkerMetrics, idleTimeout: TimeAmount) {
        self.health = health
        self.metrics = metrics
        self.idleTimeout = idleTimeout
    }

    func channelActive(context: ChannelHandlerContext) {
        restartIdleDeadline(context: context)
        context.read()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleDeadline?.cancel()
        idleDeadline = nil
        closed = true
        pending.removeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            receiving = .request(
                route: Self.route(head), version: head.version, keepAlive: head.isKeepAlive,
                isHead: head.method == .HEAD)
        case .body:
            break
        case .end:
            if let request = receiving { pending.append(request) }
            receiving = nil
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        proceed(context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parserError = error as? HTTPParserError else {
            context.close(promise: nil)  // the socket failed: nothing more to say on it
            return
        }
        guard !inputFailed else { return }  // only the first error is answered: the connection ends with it
        inputFailed = true
        pending.append(.protocolError(parserError == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest))
        proceed(context: context)
    }

    /// Answers the pending requests in order, each once the previous response is written, and asks the client for
    /// more input only when none is left.
    private func proceed(context: ChannelHandlerContext) {
        // A write that completes at once calls back in here: the loop below goes on instead of recursing.
        guard !proceeding else { return }
        proceeding = true
        defer { proceeding = false }
        while !responding && !closed {
            guard let next = pending.popFirst() else {
                if !inputFailed { context.read() }
                return
            }
            responding = true
            restartIdleDeadline(context: context)  // a complete request arrived
            let (written, closeAfter) = respond(next, context: context)
            context.flush()
            // Completes once the response is with the kernel. A client that does not read stops us here with one
            // response in hand, and the idle deadline ends it.
            written.assumeIsolated().whenComplete { [self] result in
                responding = false
                guard case .success = result, !closeAfter else {
                    closed = true
                    context.close(promise: nil)
                    return
                }
                restartIdleDeadline(context: context)
                proceed(context: context)
            }
        }
    }

    /// Writes one response; the future of its last part, and whether the connection closes after it.
    private func respond(_ pending: Pending, context: ChannelHandlerContext) -> (EventLoopFuture<Void>, Bool) {
        let status: HTTPResponseStatus
        let contentType: String
        let body: [UInt8]
        let version: HTTPVersion
        let keepAlive: Bool
        let isHead: Bool
        switch pending {
        case .request(let route, let requestVersion, let requestKeepAlive, let requestIsHead):
            (status, contentType, body) = response(route)
            (version, keepAlive, isHead) = (requestVersion, requestKeepAlive, requestIsHead)
        case .protocolError(let errorStatus):
            status = errorStatus
            contentType = "text/plain"
            let reason = errorStatus == .requestHeaderFieldsTooLarge ? "request header too long\n" : "bad request\n"
            body = Array(reason.utf8)
            (version, keepAlive, isHead) = (.http1_1, false, false)
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: "\(body.count)")
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: version, status: status, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !isHead {  // HEAD gets the headers (with the GET's length), never a body
            let buffer = context.channel.allocator.buffer(bytes: body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        return (context.write(wrapOutboundOut(.end(nil))), !keepAlive)
    }

    /// Closes the connection after `idleTimeout` unless something progresses before.
    private func restartIdleDeadline(context: ChannelHandlerContext) {
        idleDeadline?.cancel()
        idleDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: idleTimeout) {
            context.close(promise: nil)
        }
    }

    private static func route(_ head: HTTPRequestHead) -> Route {
        guard head.method == .GET || head.method == .HEAD else { return .methodNotAllowed }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch path {
        case "/healthz": return .live
        case "/readyz": return .ready
        case "/metrics": return .metrics
        default: return .notFound
        }
    }

    private func response(_ route: Route) -> (HTTPResponseStatus, String, [UInt8]) {
        switch route {
        case .methodNotAllowed:
            return (.methodNotAllowed, "text/plain", Array("GET only\n".utf8))
        case .live:
            return health.isLive
                ? (.ok, "text/plain", Array("ok\n".utf8))
                : (.serviceUnavailable, "text/plain", Array("failed\n".utf8))
        case .ready:
            return health.isReady
                ? (.ok, "text/plain", Array("ready\n".utf8))
                : (.serviceUnavailable, "text/plain", Array("not consuming\n".utf8))
        case .metrics:
            return (.ok, "text/plain; version=0.0.4; charset=utf-8", metrics.exposition())
        case .notFound:
            return (.notFound, "text/plain", Array("not found: try /healthz, /readyz or /metrics\n".utf8))
        }
    }
}

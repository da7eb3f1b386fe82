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

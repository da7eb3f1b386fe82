import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The operations endpoint: `GET /healthz` (live), `GET /readyz` (consuming), `GET /metrics` (Prometheus text).
/// A service of its own, stopped after the worker so `/metrics` can be scraped during the drain.
public final class OperationsServer: Service {
    private let host: String
    private let port: Int
    private let health: WorkerHealth
    private let metrics: WorkerMetrics
    private let logger: Logger
    /// The bound port once listening, and the callers of `listeningPort()` waiting for it.
    private let listening = Mutex<(port: Int?, waiters: [CheckedContinuation<Int, Never>])>((nil, []))

    public init(host: String, port: Int, health: WorkerHealth, metrics: WorkerMetrics, logger: Logger) {
        self.host = host
        self.port = port
        self.health = health
        self.metrics = metrics
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

    public func run() async throws {
        let health = health
        let metrics = metrics
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.pipeline.configureHTTPServerPipeline().flatMap {
                        channel.pipeline.addHandler(OperationsHandler(health: health, metrics: metrics))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            // Typically the port is taken (another worker, a sidecar): say which setting to change.
            throw ConfigurationError(
                "the operations endpoint cannot listen on \(host):\(port) (--http-host, --http-port): \(error)")
        }
        let port = channel.localAddress?.port ?? port
        let waiters = listening.withLock { listening in
            listening.port = port
            defer { listening.waiters = [] }
            return listening.waiters
        }
        waiters.forEach { $0.resume(returning: port) }
        logger.info("operations endpoint listening", metadata: ["address": "http://\(host):\(port)"])

        // Serve until graceful shutdown (after the worker has drained: services stop in reverse order).
        await withGracefulShutdownHandler {
            try? await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
    }
}

/// Answers one request per call; keep-alive is handled by NIO's server pipeline.
private final class OperationsHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: the handler is used only on its channel's event loop; its stored properties are immutable.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let health: WorkerHealth
    private let metrics: WorkerMetrics
    private var request: HTTPRequestHead?

    init(health: WorkerHealth, metrics: WorkerMetrics) {
        self.health = health
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
        case .body:
            break
        case .end:
            guard let head = request else { return }
            request = nil
            let (status, contentType, body) = respond(to: head)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: "\(body.count)")
            let keepAlive = head.isKeepAlive
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            if head.method != .HEAD {  // HEAD gets the headers (with the GET's length), never a body
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            }
            let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let channel = context.channel
                done.whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }

    private func respond(to head: HTTPRequestHead) -> (HTTPResponseStatus, String, [UInt8]) {
        guard head.method == .GET || head.method == .HEAD else {
            return (.methodNotAllowed, "text/plain", Array("GET only\n".utf8))
        }
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch path {
        case "/healthz":
            return health.isLive
                ? (.ok, "text/plain", Array("ok\n".utf8))
                : (.serviceUnavailable, "text/plain", Array("failed\n".utf8))
        case "/readyz":
            return health.isReady
                ? (.ok, "text/plain", Array("ready\n".utf8))
                : (.serviceUnavailable, "text/plain", Array("not consuming\n".utf8))
        case "/metrics":
            return (.ok, "text/plain; version=0.0.4; charset=utf-8", metrics.exposition())
        default:
            return (.notFound, "text/plain", Array("not found: try /healthz, /readyz or /metrics\n".utf8))
        }
    }
}

import NIOCore
import NIOHTTP1

/// Answers the requests of one connection in order, one at a time, and reads more from the client only when it
/// has nothing left to answer. A client that pipelines requests without reading the responses therefore holds
/// one response in our memory, whatever it sends; the idle deadline then closes its connection.
final class OperationsHandler: ChannelInboundHandler {
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
        // A request cut off by the close (the idle deadline ending a slow header) is reported as the connection
        // goes: there is no one left to answer.
        guard context.channel.isActive else { return }
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
    ///
    /// A client that stopped reading in the middle of a response is reset, not closed: a close queues its end behind
    /// the response bytes the client never takes, so the client would never see it, and the socket would hold our
    /// send buffer until the kernel gave up on it (a minute or more). An idle client between requests gets an
    /// orderly close, which its HTTP library expects of a keep-alive connection.
    private func restartIdleDeadline(context: ChannelHandlerContext) {
        idleDeadline?.cancel()
        idleDeadline = context.eventLoop.assumeIsolated().scheduleTask(in: idleTimeout) { [self] in
            if responding { resetOnClose(context.channel) }
            context.close(promise: nil)
        }
    }

    /// Makes the coming close a reset (`SO_LINGER` on with no time): the kernel drops the unsent bytes at once.
    private func resetOnClose(_ channel: any Channel) {
        // On the channel's event loop the option is set before this returns; a channel that is no socket has no
        // send buffer to drop.
        _ = (channel as? any SocketOptionProvider)?.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0))
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
            guard let reason = health.notReadyBecause else { return (.ok, "text/plain", Array("ready\n".utf8)) }
            return (.serviceUnavailable, "text/plain", Array("\(reason)\n".utf8))
        case .metrics:
            return (.ok, "text/plain; version=0.0.4; charset=utf-8", metrics.exposition())
        case .notFound:
            return (.notFound, "text/plain", Array("not found: try /healthz, /readyz or /metrics\n".utf8))
        }
    }
}

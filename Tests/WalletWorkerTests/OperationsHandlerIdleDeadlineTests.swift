import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import WalletWorker

/// The operations endpoint's idle deadline on an `EmbeddedChannel`, its clock turned by hand: a connection that makes
/// no progress is closed when the deadline passes, to the millisecond; a complete request and its written response
/// restart it; header lines that never complete a request (slowloris) do not. That the server's socket closes is
/// `OperationsServerLimitsTests`' (real sockets, real time).
@Suite("Operations endpoint: the idle deadline on a clock turned by hand")
struct OperationsHandlerIdleDeadlineTests {
    static let idleTimeout = TimeAmount.seconds(1)

    /// A connection as the server sets it up (`OperationsServer`'s child initializer), connected.
    func connection() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false)
        try channel.pipeline.syncOperations.addHandler(
            OperationsHandler(
                health: WorkerHealth(pipelines: 1), metrics: WorkerMetrics(), idleTimeout: Self.idleTimeout))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9_090)).wait()
        return channel
    }

    /// Everything the handler wrote so far, as text.
    func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = data else { continue }
            text += String(buffer: buffer)
        }
        return text
    }

    func send(_ text: String, on channel: EmbeddedChannel) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    @Test("a connection that sends nothing is closed when the deadline passes, not a millisecond before")
    func silentConnection() throws {
        let channel = try connection()
        defer { _ = try? channel.finish() }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test("header lines that never complete a request are not progress: closed one deadline after the connection")
    func slowloris() throws {
        let channel = try connection()
        defer { _ = try? channel.finish() }
        try send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", on: channel)
        for _ in 0..<9 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
            try send("X-Slow: 1\r\n", on: channel)
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(99))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive, "a header line every 100 ms kept the connection open")
        let answered = try written(channel)
        #expect(answered.isEmpty, "answered a request that never completed: \(answered)")
    }

    @Test("each answered request restarts the deadline: a client that keeps asking stays connected")
    func answeredRequestsRestartTheDeadline() throws {
        let channel = try connection()
        defer { _ = try? channel.finish() }
        for request in 0..<4 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
            #expect(channel.isActive, "closed before request \(request)")
            try send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: channel)
            #expect(try written(channel).hasPrefix("HTTP/1.1 200 OK\r\n"), "request \(request)")
        }
        // The last response restarted it: one deadline later, and not before, the idle client is closed.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }
}

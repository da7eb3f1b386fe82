#if OpenTelemetry
    import Foundation
    import Synchronization
    import TestSupport
    import Testing

    @testable import WalletWorker

    /// The OTLP/HTTP transport against a real socket: a collector scripted answer by answer (a thread per
    /// connection, blocking reads), so the retries, the refusals and a stalled body are what crosses the wire.
    @Suite("OTLP/HTTP transport", .timeLimit(.minutes(1)))
    struct OTLPHTTPTransportTests {
        /// What the scripted collector does with a request.
        enum Answer: Sendable {
            case status(Int, retryAfter: Int? = nil)
            /// 200 with this body and content type.
            case body([UInt8], contentType: String)
            /// Sends a head announcing a body, then nothing, until the test ends.
            case stallBody
        }

        /// An HTTP/1.1 server on loopback answering each request with the next scripted answer (the last one
        /// repeats), keeping every request it read.
        final class ScriptedCollector: Sendable {
            let port: Int
            private let server: LoopbackServer
            private let state: Mutex<(answers: [Answer], requests: [(head: String, body: [UInt8])])>

            init(_ answers: [Answer]) throws {
                server = try LoopbackServer()
                port = server.port
                state = Mutex((answers, []))
                server.start { [self] in serve($0) }
            }

            var requests: [(head: String, body: [UInt8])] { state.withLock { $0.requests } }

            func close() { server.close() }

            /// Serves one connection until its peer closes it (the server then closes the descriptor).
            private func serve(_ connection: Int32) {
                var buffer: [UInt8] = []
                func fill() -> Bool {
                    var chunk = [UInt8](repeating: 0, count: 65_536)
                    let count = recv(connection, &chunk, chunk.count, 0)
                    guard count > 0 else { return false }
                    buffer += chunk[..<count]
                    return true
                }
                while true {
                    let separator = Array("\r\n\r\n".utf8)
                    var headEnd: Int?
                    while headEnd == nil {
                        if buffer.count >= 4 {
                            headEnd = (0...(buffer.count - 4)).first { Array(buffer[$0..<$0 + 4]) == separator }
                        }
                        if headEnd == nil, !fill() { return }
                    }
                    let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
                    let length =
                        head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                    let bodyStart = headEnd! + 4
                    while buffer.count < bodyStart + length { if !fill() { return } }
                    let body = Array(buffer[bodyStart..<bodyStart + length])
                    buffer.removeFirst(bodyStart + length)
                    let answer = state.withLock { state -> Answer in
                        state.requests.append((head, body))
                        return state.answers.count > 1 ? state.answers.removeFirst() : state.answers[0]
                    }
                    let reply: String
                    switch answer {
                    case .status(let code, let retryAfter):
                        reply =
                            "HTTP/1.1 \(code) Scripted\r\nContent-Length: 0\r\n"
                            + (retryAfter.map { "Retry-After: \($0)\r\n" } ?? "") + "\r\n"
                    case .body(let bytes, let contentType):
                        reply =
                            "HTTP/1.1 200 OK\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n\r\n"
                            + String(decoding: bytes, as: UTF8.self)
                    case .stallBody:
                        reply = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 10\r\n\r\n"
                    }
                    _ = Array(reply.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
                    if case .stallBody = answer {
                        while fill() {}  // until the client gives up on it and closes
                        return
                    }
                }
            }
        }

        /// A transport to `collector` whose attempts are not cut off by a timeout: only the stalled-body test is
        /// about deadlines. A test process under load (all suites at once on two cores) can leave an answer that
        /// has arrived waiting for a thread for seconds; with the default five-second attempt, that once failed the
        /// retry test. A transport that truly hangs is ended by the suite's time limit.
        private func transport(_ collector: ScriptedCollector, headers: [OTLPExportSettings.Field] = [])
            throws -> OTLPHTTPTransport
        {
            var settings = OTLPExportSettings.defaults
            settings.endpoint = "http://127.0.0.1:\(collector.port)/v1/traces"
            settings.headers = headers
            settings.requestTimeout = Self.unreachedTimeout
            return try OTLPHTTPTransport(settings: settings)
        }

        /// Longer than the suite's time limit.
        private static let unreachedTimeout = Duration.seconds(600)

        /// An export deadline the tests that are not about deadlines never reach.
        private var unreachedDeadline: ContinuousClock.Instant { .now.advanced(by: Self.unreachedTimeout) }

        @Test func aRequestIsAPostOfTheBodyWithTheConfiguredHeaders() async throws {
            let collector = try ScriptedCollector([.status(200)])
            defer { collector.close() }
            let transport = try transport(collector, headers: [.init("authorization", "Bearer t=1")])
            _ = try await transport.send(
                [1, 2, 3], contentType: "application/x-protobuf", deadline: unreachedDeadline)
            await transport.shutdown()
            let request = try #require(collector.requests.first)
            #expect(request.head.hasPrefix("POST /v1/traces HTTP/1.1"))
            #expect(request.head.lowercased().contains("content-type: application/x-protobuf"))
            #expect(request.head.contains("authorization: Bearer t=1"))
            #expect(request.body == [1, 2, 3])
        }

        @Test func aPartialSuccessIsReadFromProtobufAndJSON() async throws {
            // ExportTraceServiceResponse { partial_success (1) { rejected_spans (1) = 3, error_message (2) = "quota" } }
            let protobuf: [UInt8] = [0x0a, 0x09, 0x08, 0x03, 0x12, 0x05] + Array("quota".utf8)
            let json = Array(#"{"partialSuccess":{"rejectedSpans":"3","errorMessage":"quota"}}"#.utf8)
            for answer in [
                Answer.body(protobuf, contentType: "application/x-protobuf"),
                .body(json, contentType: "application/json"),
            ] {
                let collector = try ScriptedCollector([answer])
                defer { collector.close() }
                let transport = try transport(collector)
                let partial = try await transport.send(
                    [7], contentType: "application/x-protobuf", deadline: unreachedDeadline)
                await transport.shutdown()
                #expect(partial == OTLPPartialSuccess(rejectedSpans: 3, message: "quota"))
            }
            // A full success says nothing.
            #expect(OTLPPartialSuccess.parse([], contentType: "application/x-protobuf") == nil)
            #expect(OTLPPartialSuccess.parse(Array("{}".utf8), contentType: "application/json") == nil)
            #expect(OTLPPartialSuccess.parse([0x0a, 0x00], contentType: "application/x-protobuf") == nil)
            #expect(OTLPPartialSuccess.parse([0x0a, 0x09], contentType: "application/x-protobuf") == nil, "truncated")
        }

        @Test func aBusyCollectorIsRetriedAfterItsRetryAfter() async throws {
            let collector = try ScriptedCollector([.status(503, retryAfter: 0), .status(429), .status(200)])
            defer { collector.close() }
            let transport = try transport(collector)
            _ = try await transport.send(
                [7], contentType: "application/json", deadline: unreachedDeadline)
            await transport.shutdown()
            #expect(collector.requests.count == 3)
        }

        /// Released without `shutdown()` (a send that threw before it): the transport shuts its client down itself.
        /// Without that, AsyncHTTPClient's debug build stops the process at the client's release.
        @Test func aTransportReleasedWithoutShutdownShutsItsClientDown() async throws {
            let collector = try ScriptedCollector([.status(200)])
            defer { collector.close() }
            var transport: OTLPHTTPTransport? = try transport(collector)
            _ = try await transport?.send(
                [7], contentType: "application/json", deadline: unreachedDeadline)
            transport = nil
            #expect(collector.requests.count == 1)
        }

        @Test(arguments: [400, 401, 404, 500])
        func anyOtherRefusalFailsAtOnce(code: Int) async throws {
            let collector = try ScriptedCollector([.status(code)])
            defer { collector.close() }
            let transport = try transport(collector)
            await #expect(throws: OTLPExportError.self) {
                try await transport.send(
                    [7], contentType: "application/json", deadline: unreachedDeadline)
            }
            await transport.shutdown()
            #expect(collector.requests.count == 1)
        }

        @Test func aCollectorThatStallsItsBodyIsCutOffAtTheDeadline() async throws {
            let collector = try ScriptedCollector([.stallBody])
            defer { collector.close() }
            let transport = try transport(collector)
            let started = ContinuousClock.now
            await #expect(throws: OTLPExportError.deadlineExceeded) {
                try await transport.send(
                    [7], contentType: "application/x-protobuf", deadline: .now.advanced(by: .milliseconds(300)))
            }
            // Cut off at its deadline, not at the suite's time limit (the bound is generous for a loaded machine).
            #expect(ContinuousClock.now - started < .seconds(20))
            await transport.shutdown()
        }
    }

#endif

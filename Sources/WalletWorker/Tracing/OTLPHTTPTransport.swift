#if OpenTelemetry
    import AsyncHTTPClient
    import NIOCore
    import NIOSSL
    import Synchronization

    /// OTLP/HTTP to the collector (https://opentelemetry.io/docs/specs/otlp/#otlphttp) over AsyncHTTPClient: a POST
    /// per batch on a kept-alive connection, TLS from the `OTEL_EXPORTER_OTLP_*CERTIFICATE`/`CLIENT_KEY` files, and
    /// the specification's retries: 429, 502, 503 and 504 are retried after `Retry-After` or an exponential backoff,
    /// until the export's deadline; any other answer but 2xx fails the export. A 2xx answer's partial success (spans
    /// the collector rejected) is returned.
    ///
    /// The HTTP client is made at the first export and shut down by `shutdown()`: a worker that fails to start after
    /// its tracing was set up leaves no client behind (AsyncHTTPClient requires each to be shut down).
    final class OTLPHTTPTransport: SpanExportTransport {
        private let configuration: HTTPClient.Configuration
        private let client = Mutex<HTTPClient?>(nil)
        private let endpoint: String
        private let headers: [OTLPExportSettings.Field]
        private let requestTimeout: Duration

        /// Throws a `ConfigurationError` naming the file when a certificate or key cannot be read.
        init(settings: OTLPExportSettings) throws(ConfigurationError) {
            var configuration = HTTPClient.Configuration()
            if settings.endpoint.lowercased().hasPrefix("https://") {
                configuration.tlsConfiguration = try Self.tls(settings)
            }
            configuration.redirectConfiguration = .disallow
            self.configuration = configuration
            endpoint = settings.endpoint
            headers = settings.headers
            requestTimeout = settings.requestTimeout
        }

        private static func tls(_ settings: OTLPExportSettings) throws(ConfigurationError) -> TLSConfiguration {
            var tls = TLSConfiguration.makeClientConfiguration()
            do {
                if let path = settings.certificate {
                    tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
                }
                if let certificate = settings.clientCertificate, let key = settings.clientKey {
                    tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
                    tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
                }
            } catch {
                throw ConfigurationError(
                    "OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE or _CLIENT_KEY: a PEM file could not be read: \(error)"
                )
            }
            return tls
        }

        func send(_ body: [UInt8], contentType: String, deadline: ContinuousClock.Instant) async throws
            -> OTLPPartialSuccess?
        {
            let request = request(body, contentType: contentType)
            let client = startedClient()
            var attempt = 0
            while true {
                let attemptDeadline = min(deadline, ContinuousClock.now.advanced(by: requestTimeout))
                let answer = try await Self.within(attemptDeadline) {
                    let response = try await client.execute(request, deadline: .distantFuture)
                    // The body too: a collector that sends its head and then stalls is cut off at the deadline.
                    let body = try await response.body.collect(upTo: 1 << 20)
                    return (
                        code: Int(response.status.code),
                        retryAfter: response.headers.first(name: "Retry-After").flatMap(Int.init),
                        partial: OTLPPartialSuccess.parse(
                            Array(buffer: body), contentType: response.headers.first(name: "Content-Type"))
                    )
                }
                if (200..<300).contains(answer.code) { return answer.partial }
                guard [429, 502, 503, 504].contains(answer.code) else { throw OTLPExportError.refused(answer.code) }
                attempt += 1
                let wait = answer.retryAfter.map { Duration.seconds($0) } ?? .milliseconds(100 * (1 << min(attempt, 6)))
                guard ContinuousClock.now.advanced(by: wait) < deadline else {
                    throw OTLPExportError.refused(answer.code)
                }
                try await Task.sleep(for: wait)
            }
        }

        private func request(_ body: [UInt8], contentType: String) -> HTTPClientRequest {
            var request = HTTPClientRequest(url: endpoint)
            request.method = .POST
            for header in headers { request.headers.add(name: header.name, value: header.value) }
            request.headers.replaceOrAdd(name: "Content-Type", value: contentType)
            request.headers.replaceOrAdd(name: "User-Agent", value: "wallet-worker/\(WorkerVersion.current)")
            request.body = .bytes(ByteBuffer(bytes: body))
            return request
        }

        /// `body`'s result, or `deadlineExceeded` once `deadline` passes (`body` is then cancelled: AsyncHTTPClient
        /// drops the request).
        private static func within<T: Sendable>(
            _ deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () async throws -> T
        ) async throws -> T {
            try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(until: deadline, clock: .continuous)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let value = first else {
                    throw OTLPExportError.deadlineExceeded
                }
                return value
            }
        }

        private func startedClient() -> HTTPClient {
            client.withLock { client in
                if let client { return client }
                let started = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
                client = started
                return started
            }
        }

        func shutdown() async {
            try? await client.withLock { $0.take() }?.shutdown()
        }

        /// A transport released without `shutdown()` (a send that threw before its caller's shutdown, in a test or a
        /// worker stopping on a failure) still shuts its client down, in the background: a debug build of
        /// AsyncHTTPClient stops the whole process when a client that was never shut down is released, which took a
        /// full test run down once.
        deinit {
            client.withLock { $0.take() }?.shutdown { _ in }
        }
    }

    /// Why an export failed, when the collector answered.
    enum OTLPExportError: Error, Equatable, CustomStringConvertible {
        case refused(Int)
        case deadlineExceeded

        var description: String {
            switch self {
            case .refused(let code): "the collector answered HTTP \(code)"
            case .deadlineExceeded: "no answer within the export timeout"
            }
        }
    }
#endif

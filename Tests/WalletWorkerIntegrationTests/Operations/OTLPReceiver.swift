import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A real OTLP/HTTP receiver on a loopback port, for the tracing tests: an HTTP/1.1 server (keep-alive,
/// `Content-Length` or chunked bodies) that answers every `POST /v1/traces` with `200 {}` as JSON and keeps the
/// bodies. Blocking sockets on threads of its own, so it never waits on the test's concurrency pool.
/// A stalled receiver (`answers: false`) reads each request and never answers: a collector that takes the
/// connection and hangs.
final class OTLPReceiver: Sendable {
    struct Request: Sendable {
        var method: String
        var path: String
        var contentType: String?
        var body: [UInt8]
        /// Every header, names lower-cased.
        var headers: [String: String] = [:]
    }

    let port: Int
    let answers: Bool
    private let server: LoopbackServer
    private let received = Mutex<[Request]>([])

    init(answers: Bool = true) throws {
        self.answers = answers
        server = try LoopbackServer()
        port = server.port
        server.start { [self] in serve($0) }
    }

    var requests: [Request] { received.withLock { $0 } }

    /// The spans of every `POST /v1/traces` so far, decoded from OTLP JSON.
    func spans() throws -> [ReceivedSpan] {
        try requests.filter { $0.method == "POST" && $0.path == "/v1/traces" }.flatMap {
            try ReceivedSpan.decode($0.body)
        }
    }

    /// Stops accepting and ends the connections being served.
    func close() { server.close() }

    private func serve(_ descriptor: Int32) {
        var reader = SocketReader(descriptor: descriptor)
        while let head = reader.readHead() {
            let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
            let requestLine = lines.first?.split(separator: " ") ?? []
            guard requestLine.count >= 2 else { return }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                    in: .whitespaces)
            }
            let body: [UInt8]
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                guard let chunked = reader.readChunkedBody() else { return }
                body = chunked
            } else {
                guard let bytes = reader.read(count: Int(headers["content-length"] ?? "0") ?? 0) else { return }
                body = bytes
            }
            received.withLock {
                $0.append(
                    Request(
                        method: String(requestLine[0]), path: String(requestLine[1]),
                        contentType: headers["content-type"], body: body, headers: headers))
            }
            guard answers else {
                // Hangs: waits for the client to give up and close.
                while reader.readHead() != nil {}
                return
            }
            let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            let bytes = Array(answer.utf8)
            let sent = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent == bytes.count else { return }
        }
    }
}

/// A span as an OTLP/JSON export request carries it.
struct ReceivedSpan: Sendable, CustomStringConvertible {
    var traceID: String
    var spanID: String
    var parentSpanID: String?
    var name: String
    /// OTLP's `SpanKind`: 3 client, 4 producer, 5 consumer.
    var kind: Int
    var attributes: [String: String]
    /// OTLP's `Status.code`: 0 unset, 1 ok, 2 error.
    var statusCode: Int
    var statusMessage: String?
    var serviceName: String?

    var description: String {
        "\(name) kind=\(kind) trace=\(traceID) span=\(spanID) parent=\(parentSpanID ?? "-") status=\(statusCode) \(attributes)"
    }

    static func decode(_ body: [UInt8]) throws -> [ReceivedSpan] {
        guard let root = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return [] }
        var spans: [ReceivedSpan] = []
        for resourceSpans in root["resourceSpans"] as? [[String: Any]] ?? [] {
            let resource = attributes(of: (resourceSpans["resource"] as? [String: Any])?["attributes"])
            for scopeSpans in resourceSpans["scopeSpans"] as? [[String: Any]] ?? [] {
                for span in scopeSpans["spans"] as? [[String: Any]] ?? [] {
                    let status = span["status"] as? [String: Any]
                    spans.append(
                        ReceivedSpan(
                            traceID: hexID(span["traceId"]) ?? "", spanID: hexID(span["spanId"]) ?? "",
                            parentSpanID: hexID(span["parentSpanId"]), name: span["name"] as? String ?? "",
                            kind: integer(span["kind"]) ?? 0, attributes: attributes(of: span["attributes"]),
                            statusCode: integer(status?["code"]) ?? 0, statusMessage: status?["message"] as? String,
                            serviceName: resource["service.name"]))
                }
            }
        }
        return spans
    }

    /// OTLP/JSON says ids are lower-case hex (not protobuf's base64 mapping); anything else reads as nil, so the
    /// tests that look for an id fail.
    private static func hexID(_ value: Any?) -> String? {
        guard let text = value as? String, text.count == 32 || text.count == 16,
            text.allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else { return nil }
        return text
    }

    private static func integer(_ value: Any?) -> Int? {
        if let number = value as? NSNumber { return number.intValue }
        if let text = value as? String { return Int(text) }
        return nil
    }

    /// Attribute values as text (`stringValue`, `intValue`, `boolValue`, `doubleValue`).
    private static func attributes(of value: Any?) -> [String: String] {
        var result: [String: String] = [:]
        for attribute in value as? [[String: Any]] ?? [] {
            guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any] else {
                continue
            }
            if let text = value["stringValue"] as? String {
                result[key] = text
            } else if let number = value["intValue"] {
                result[key] = "\(integer(number) ?? 0)"
            } else if let flag = value["boolValue"] as? Bool {
                result[key] = "\(flag)"
            } else if let number = value["doubleValue"] {
                result[key] = "\(number)"
            }
        }
        return result
    }
}

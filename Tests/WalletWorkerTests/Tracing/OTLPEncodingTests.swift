import Foundation
import Testing
import Tracing

@testable import WalletWorker

/// The export request bodies, read back: protobuf by a wire-format reader, JSON by Foundation's parser.
@Suite("OTLP export request encoding")
struct OTLPEncodingTests {
    static let request = OTLPTraceRequest(
        resource: OTLPTraceRequest.resource(
            serviceName: "wallet-worker-eu", attributes: [("deployment.environment", "prod"), ("service.name", "lost")]),
        scopeName: "wallet-worker", scopeVersion: "9.9.9")

    static let identity = SpanIdentity(
        traceID: TraceID(high: 0x4bf9_2f35_77b3_4da6, low: 0xa3ce_929d_0e0e_4736), spanID: 0x00f0_67aa_0ba9_02b7,
        flags: 1, isRemote: false)

    /// A span with one attribute of every kind, an exception event, a link and an error status.
    static func span(name: String = "process wallet.notifications.work", longText: String = "x") -> FinishedSpan {
        var attributes = SpanAttributes()
        attributes["messaging.system"] = "rabbitmq"
        attributes["server.port"] = 5672
        attributes["negative"] = SpanAttribute.int64(-3)
        attributes["ratio"] = 0.25
        attributes["wallet.redelivered"] = true
        attributes["tags"] = SpanAttribute.stringArray(["a", "b\"c"])
        attributes["quoted"] = "line\nbreak \u{1} \"quote\" \\ é €"
        attributes["long"] = longText
        var linked = InstrumentationContext.topLevel
        linked.spanIdentity = SpanIdentity(
            traceID: TraceID(high: 1, low: 2), spanID: 3, flags: 0, isRemote: true)
        return FinishedSpan(
            identity: identity, parentSpanID: 0x1122_3344_5566_7788, name: name, kind: .consumer,
            startNanoseconds: 1_700_000_000_123_456_789, endNanoseconds: 1_700_000_000_223_456_789,
            attributes: attributes, status: SpanStatus(code: .error, message: "rejected: not JSON"),
            events: [
                SpanEvent(
                    name: "exception",
                    at: DefaultTracerClock.Timestamp(nanosecondsSinceEpoch: 1_700_000_000_200_000_000),
                    attributes: ["exception.type": "StoreError"])
            ],
            links: [SpanLink(context: linked, attributes: ["why": "batch"])])
    }

    @Test func protobufCarriesEverySpanFieldAndTheResource() throws {
        // A long attribute puts the span past 127 and 16,383 bytes: lengths of two and three bytes are read back.
        let spans = [Self.span(), Self.span(name: "second", longText: String(repeating: "y", count: 20_000))]
        let body = Self.request.protobuf(spans)
        let (resource, decoded) = try ProtobufReader.spans(ofRequest: body)
        #expect(decoded.count == 2)
        #expect(resource["service.name"] == .bytes(Array("wallet-worker-eu".utf8)), "OTEL_SERVICE_NAME wins")
        #expect(resource["deployment.environment"] == .bytes(Array("prod".utf8)))
        #expect(resource["telemetry.sdk.language"] == .bytes(Array("swift".utf8)))

        let span = try #require(decoded.first)
        #expect(try ProtobufReader.hex(1, in: span) == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(try ProtobufReader.hex(2, in: span) == "00f067aa0ba902b7")
        #expect(try ProtobufReader.hex(4, in: span) == "1122334455667788")
        #expect(try ProtobufReader.string(5, in: span) == "process wallet.notifications.work")
        #expect(try ProtobufReader.field(6, in: span) == .varint(5))
        #expect(try ProtobufReader.field(7, in: span) == .fixed64(1_700_000_000_123_456_789))
        #expect(try ProtobufReader.field(8, in: span) == .fixed64(1_700_000_000_223_456_789))
        #expect(try ProtobufReader.field(16, in: span) == .fixed32(1))

        let attributes = try ProtobufReader.attributes(9, in: span)
        #expect(attributes.count == 8)
        #expect(attributes["messaging.system"] == .bytes(Array("rabbitmq".utf8)))
        #expect(attributes["server.port"] == .varint(5672))
        #expect(attributes["negative"] == .varint(UInt64(bitPattern: -3)))
        #expect(attributes["ratio"] == .fixed64((0.25).bitPattern))
        #expect(attributes["wallet.redelivered"] == .varint(1))
        #expect(attributes["quoted"] == .bytes(Array("line\nbreak \u{1} \"quote\" \\ é €".utf8)))
        // An array: AnyValue.array_value (5) holding ArrayValue.values (1), each an AnyValue.
        guard case .bytes(let array)? = attributes["tags"] else {
            Issue.record("tags is not an array: \(String(describing: attributes["tags"]))")
            return
        }
        let elements = try ProtobufReader.messages(1, in: array).map { try ProtobufReader.string(1, in: $0) }
        #expect(elements == ["a", "b\"c"])

        let event = try #require(try ProtobufReader.messages(11, in: span).first)
        #expect(try ProtobufReader.field(1, in: event) == .fixed64(1_700_000_000_200_000_000))
        #expect(try ProtobufReader.string(2, in: event) == "exception")
        #expect(try ProtobufReader.attributes(3, in: event)["exception.type"] == .bytes(Array("StoreError".utf8)))

        let link = try #require(try ProtobufReader.messages(13, in: span).first)
        #expect(try ProtobufReader.hex(1, in: link) == "00000000000000010000000000000002")
        #expect(try ProtobufReader.hex(2, in: link) == "0000000000000003")
        #expect(try ProtobufReader.attributes(4, in: link)["why"] == .bytes(Array("batch".utf8)))

        let status = try #require(try ProtobufReader.messages(15, in: span).first)
        #expect(try ProtobufReader.string(2, in: status) == "rejected: not JSON")
        #expect(try ProtobufReader.field(3, in: status) == .varint(2))

        let long = try #require(decoded.last)
        #expect(try ProtobufReader.string(5, in: long) == "second")
        #expect(
            try ProtobufReader.attributes(9, in: long)["long"]
                == .bytes(Array(repeating: UInt8(ascii: "y"), count: 20_000)))
    }

    @Test func aRootSpanWithoutStatusOrEventsHasNoneOfThoseFields() throws {
        var span = Self.span()
        span.parentSpanID = nil
        span.status = nil
        span.events = []
        span.links = []
        span.attributes = [:]
        let (_, decoded) = try ProtobufReader.spans(ofRequest: Self.request.protobuf([span]))
        let fields = try ProtobufReader.fields(try #require(decoded.first)).map(\.number)
        #expect(fields == [1, 2, 5, 6, 7, 8, 16])
    }

    @Test func anOKStatusCarriesNoMessage() throws {
        var span = Self.span()
        span.status = SpanStatus(code: .ok, message: "ignored")
        let (_, decoded) = try ProtobufReader.spans(ofRequest: Self.request.protobuf([span]))
        let encoded = try #require(decoded.first)
        let status = try #require(try ProtobufReader.messages(15, in: encoded).first)
        #expect(try ProtobufReader.fields(status).map(\.number) == [3])
        #expect(try ProtobufReader.field(3, in: status) == .varint(1))
    }

    @Test func anEmptyBatchIsAValidRequest() throws {
        let (resource, spans) = try ProtobufReader.spans(ofRequest: Self.request.protobuf([]))
        #expect(spans.isEmpty && resource["service.name"] != nil)
    }

    @Test func jsonIsTheOTLPJSONMapping() throws {
        let body = Self.request.json([Self.span()])
        let root = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let resourceSpans = try #require((root["resourceSpans"] as? [[String: Any]])?.first)
        let resource = try #require((resourceSpans["resource"] as? [String: Any])?["attributes"] as? [[String: Any]])
        #expect(
            resource.contains {
                ($0["key"] as? String) == "service.name"
                    && ($0["value"] as? [String: String])?["stringValue"] == "wallet-worker-eu"
            })
        let scopeSpans = try #require((resourceSpans["scopeSpans"] as? [[String: Any]])?.first)
        #expect((scopeSpans["scope"] as? [String: String])?["name"] == "wallet-worker")
        let span = try #require((scopeSpans["spans"] as? [[String: Any]])?.first)
        #expect(span["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736", "hex, as OTLP/JSON says")
        #expect(span["spanId"] as? String == "00f067aa0ba902b7")
        #expect(span["parentSpanId"] as? String == "1122334455667788")
        #expect(span["kind"] as? Int == 5)
        #expect(span["startTimeUnixNano"] as? String == "1700000000123456789", "64-bit integers as strings")
        #expect(span["flags"] as? Int == 1)
        let attributes = try #require(span["attributes"] as? [[String: Any]])
        func value(_ key: String) -> [String: Any]? {
            attributes.first { $0["key"] as? String == key }?["value"] as? [String: Any]
        }
        #expect(value("server.port")?["intValue"] as? String == "5672")
        #expect(value("negative")?["intValue"] as? String == "-3")
        #expect(value("ratio")?["doubleValue"] as? Double == 0.25)
        #expect(value("wallet.redelivered")?["boolValue"] as? Bool == true)
        #expect(value("quoted")?["stringValue"] as? String == "line\nbreak \u{1} \"quote\" \\ é €")
        let tags = (value("tags")?["arrayValue"] as? [String: Any])?["values"] as? [[String: String]]
        #expect(tags?.compactMap { $0["stringValue"] } == ["a", "b\"c"])
        let status = try #require(span["status"] as? [String: Any])
        #expect(status["code"] as? Int == 2 && status["message"] as? String == "rejected: not JSON")
        let event = try #require((span["events"] as? [[String: Any]])?.first)
        #expect(event["name"] as? String == "exception" && event["timeUnixNano"] as? String == "1700000000200000000")
        let link = try #require((span["links"] as? [[String: Any]])?.first)
        #expect(link["traceId"] as? String == "00000000000000010000000000000002")
    }
}

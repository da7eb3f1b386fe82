import Tracing

/// OTLP/HTTP's JSON body (`application/json`), as the OTLP specification maps the protobuf messages: lowerCamelCase
/// field names, trace and span ids as hex (not base64), enums as numbers, 64-bit integers as decimal strings.
extension OTLPTraceRequest {
    func json(_ spans: [FinishedSpan]) -> [UInt8] {
        var out = JSONOutput()
        out.bytes.reserveCapacity(spans.count * 768 + 256)
        out.raw(#"{"resourceSpans":[{"resource":{"attributes":"#)
        out.attributes(resource.map { ($0.key, OTLPValue.string($0.value)) })
        out.raw(#"},"scopeSpans":[{"scope":{"name":"#)
        out.string(scopeName)
        out.raw(#","version":"#)
        out.string(scopeVersion)
        out.raw(#"},"spans":["#)
        for (index, span) in spans.enumerated() {
            if index > 0 { out.raw(",") }
            out.span(span)
        }
        out.raw("]}]}]}")
        return out.bytes
    }
}

private struct JSONOutput {
    var bytes: [UInt8] = []

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func decimal<T: BinaryInteger>(_ value: T) { bytes.append(contentsOf: String(value).utf8) }

    /// A JSON string, escaped as RFC 8259 requires (quotes, backslashes and control characters).
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw(#"\""#)
            case UInt8(ascii: "\\"): raw(#"\\"#)
            case UInt8(ascii: "\n"): raw(#"\n"#)
            case UInt8(ascii: "\r"): raw(#"\r"#)
            case UInt8(ascii: "\t"): raw(#"\t"#)
            case 0..<0x20:
                raw(#"\u00"#)
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xf)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func hexString(_ values: UInt64...) {
        bytes.append(UInt8(ascii: "\""))
        for value in values { bytes.append(contentsOf: LowerHex.string(value).utf8) }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func value(_ value: OTLPValue) {
        switch value {
        case .string(let text):
            raw(#"{"stringValue":"#)
            string(text)
        case .bool(let flag):
            raw(#"{"boolValue":"#)
            if flag { raw("true") } else { raw("false") }
        case .int(let number):
            raw(#"{"intValue":""#)
            decimal(number)
            raw(#"""#)
        case .double(let number):
            if number.isFinite {
                raw(#"{"doubleValue":"#)
                bytes.append(contentsOf: "\(number)".utf8)
            } else {
                raw(#"{"doubleValue":"#)
                string(number.isNaN ? "NaN" : number > 0 ? "Infinity" : "-Infinity")
            }
        case .array(let values):
            raw(#"{"arrayValue":{"values":["#)
            for (index, element) in values.enumerated() {
                if index > 0 { raw(",") }
                self.value(element)
            }
            raw("]}")
        }
        raw("}")
    }

    mutating func attributes(_ attributes: [(String, OTLPValue)]) {
        raw("[")
        for (index, (key, value)) in attributes.enumerated() {
            if index > 0 { raw(",") }
            raw(#"{"key":"#)
            string(key)
            raw(#","value":"#)
            self.value(value)
            raw("}")
        }
        raw("]")
    }

    mutating func attributes(_ attributes: SpanAttributes) {
        var pairs: [(String, OTLPValue)] = []
        pairs.reserveCapacity(attributes.count)
        attributes.forEach { key, attribute in pairs.append((key, OTLPValue(attribute))) }
        self.attributes(pairs)
    }

    mutating func span(_ span: FinishedSpan) {
        raw(#"{"traceId":"#)
        hexString(span.identity.traceID.high, span.identity.traceID.low)
        raw(#","spanId":"#)
        hexString(span.identity.spanID)
        if let parent = span.parentSpanID {
            raw(#","parentSpanId":"#)
            hexString(parent)
        }
        raw(#","name":"#)
        string(span.name)
        raw(#","kind":"#)
        decimal(span.kind.otlpValue)
        raw(#","startTimeUnixNano":""#)
        decimal(span.startNanoseconds)
        raw(#"","endTimeUnixNano":""#)
        decimal(span.endNanoseconds)
        raw(#"","attributes":"#)
        attributes(span.attributes)
        if !span.events.isEmpty {
            raw(#","events":["#)
            for (index, event) in span.events.enumerated() {
                if index > 0 { raw(",") }
                raw(#"{"timeUnixNano":""#)
                decimal(event.nanosecondsSinceEpoch)
                raw(#"","name":"#)
                string(event.name)
                raw(#","attributes":"#)
                attributes(event.attributes)
                raw("}")
            }
            raw("]")
        }
        let links = span.links.compactMap { link in link.context.spanIdentity.map { ($0, link.attributes) } }
        if !links.isEmpty {
            raw(#","links":["#)
            for (index, (linked, linkAttributes)) in links.enumerated() {
                if index > 0 { raw(",") }
                raw(#"{"traceId":"#)
                hexString(linked.traceID.high, linked.traceID.low)
                raw(#","spanId":"#)
                hexString(linked.spanID)
                raw(#","attributes":"#)
                attributes(linkAttributes)
                raw(#","flags":"#)
                decimal(linked.flags)
                raw("}")
            }
            raw("]")
        }
        if let status = span.status {
            raw(#","status":{"code":"#)
            decimal(status.code.otlpValue)
            if status.code == .error, let message = status.message, !message.isEmpty {
                raw(#","message":"#)
                string(message)
            }
            raw("}")
        }
        raw(#","flags":"#)
        decimal(span.identity.flags)
        raw("}")
    }
}

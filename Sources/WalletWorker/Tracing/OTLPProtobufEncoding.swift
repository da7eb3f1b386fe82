import Tracing

/// OTLP/HTTP's protobuf body (`application/x-protobuf`), written in one pass: every nested message's size is
/// worked out arithmetically from its fields before it is written, so nothing is encoded twice and nothing is sized
/// once per level it is nested in (what made SwiftProtobuf's encoding 14% of a traced worker's CPU).
extension OTLPTraceRequest {
    func protobuf(_ spans: [FinishedSpan]) -> [UInt8] {
        // Each span's body, one after the other, then the request around them.
        var bodies = ProtobufWriter()
        bodies.bytes.reserveCapacity(spans.count * 512)
        var ends: [Int] = []
        ends.reserveCapacity(spans.count)
        for span in spans {
            bodies.span(span)
            ends.append(bodies.bytes.count)
        }
        var resourceSize = 0
        for attribute in resource {
            resourceSize += ProtobufWriter.fieldSize(
                ProtobufWriter.keyValueSize(attribute.key, .string(attribute.value)))
        }
        let scopeSize =
            ProtobufWriter.fieldSize(scopeName.utf8.count) + ProtobufWriter.fieldSize(scopeVersion.utf8.count)
        var scopeSpansSize = ProtobufWriter.fieldSize(scopeSize)
        var start = 0
        for end in ends {
            scopeSpansSize += ProtobufWriter.fieldSize(end - start)
            start = end
        }
        let resourceSpansSize = ProtobufWriter.fieldSize(resourceSize) + ProtobufWriter.fieldSize(scopeSpansSize)

        var request = ProtobufWriter()
        request.bytes.reserveCapacity(ProtobufWriter.fieldSize(resourceSpansSize))
        request.lengthDelimited(1, size: resourceSpansSize)  // ExportTraceServiceRequest.resource_spans
        request.lengthDelimited(1, size: resourceSize)  // ResourceSpans.resource
        for attribute in resource {
            request.keyValue(1, attribute.key, .string(attribute.value))  // Resource.attributes
        }
        request.lengthDelimited(2, size: scopeSpansSize)  // ResourceSpans.scope_spans
        request.lengthDelimited(1, size: scopeSize)  // ScopeSpans.scope
        request.string(1, scopeName)
        request.string(2, scopeVersion)
        start = 0
        bodies.bytes.withUnsafeBufferPointer { all in
            for end in ends {
                request.lengthDelimited(2, size: end - start)  // ScopeSpans.spans
                request.bytes.append(contentsOf: UnsafeBufferPointer(rebasing: all[start..<end]))
                start = end
            }
        }
        return request.bytes
    }
}

/// Protobuf's wire format, the few parts OTLP's traces use.
struct ProtobufWriter {
    var bytes: [UInt8] = []

    private enum WireType: UInt64 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    // MARK: - Sizes

    static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }

    /// A length-delimited field of a payload of `size` bytes, tag included, for field numbers below 16 (a one-byte
    /// tag): every length-delimited field OTLP's traces use. The one field above (`Span.flags`, 16) is a fixed32
    /// written into a span's body, whose length is measured, not computed.
    static func fieldSize(_ size: Int) -> Int { 1 + varintSize(UInt64(size)) + size }

    static func valueSize(_ value: OTLPValue) -> Int {
        switch value {
        case .string(let text): fieldSize(text.utf8.count)
        case .bool: 2
        case .int(let number): 1 + varintSize(UInt64(bitPattern: number))
        case .double: 9
        case .array(let values): fieldSize(values.reduce(0) { $0 + fieldSize(valueSize($1)) })
        }
    }

    static func keyValueSize(_ key: String, _ value: OTLPValue) -> Int {
        fieldSize(key.utf8.count) + fieldSize(valueSize(value))
    }

    // MARK: - Fields

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func tag(_ field: UInt64, _ type: WireType) { varint(field << 3 | type.rawValue) }

    mutating func lengthDelimited(_ field: UInt64, size: Int) {
        tag(field, .lengthDelimited)
        varint(UInt64(size))
    }

    mutating func string(_ field: UInt64, _ text: String) {
        lengthDelimited(field, size: text.utf8.count)
        bytes.append(contentsOf: text.utf8)
    }

    mutating func varintField(_ field: UInt64, _ value: UInt64) {
        tag(field, .varint)
        varint(value)
    }

    mutating func fixed64(_ field: UInt64, _ value: UInt64) {
        tag(field, .fixed64)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed32(_ field: UInt64, _ value: UInt32) {
        tag(field, .fixed32)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// A `bytes` field holding big-endian ids (trace ids are 16 bytes, span ids 8).
    mutating func ids(_ field: UInt64, _ values: UInt64...) {
        lengthDelimited(field, size: values.count * 8)
        for value in values {
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
    }

    mutating func value(_ value: OTLPValue) {
        switch value {
        case .string(let text): string(1, text)
        case .bool(let flag): varintField(2, flag ? 1 : 0)
        case .int(let number): varintField(3, UInt64(bitPattern: number))
        case .double(let number): fixed64(4, number.bitPattern)
        case .array(let values):
            lengthDelimited(5, size: values.reduce(0) { $0 + Self.fieldSize(Self.valueSize($1)) })
            for element in values {
                lengthDelimited(1, size: Self.valueSize(element))
                self.value(element)
            }
        }
    }

    /// A `KeyValue` as field `field` of its message.
    mutating func keyValue(_ field: UInt64, _ key: String, _ value: OTLPValue) {
        lengthDelimited(field, size: Self.keyValueSize(key, value))
        string(1, key)
        lengthDelimited(2, size: Self.valueSize(value))
        self.value(value)
    }

    mutating func attributes(_ field: UInt64, _ attributes: SpanAttributes) {
        attributes.forEach { key, attribute in keyValue(field, key, OTLPValue(attribute)) }
    }

    /// An event's or a link's attributes, converted once: sized, then written from the same values (a
    /// `stringConvertible` describes itself once, so its length cannot change between the two).
    static func converted(_ attributes: SpanAttributes) -> [(key: String, value: OTLPValue)] {
        var converted: [(key: String, value: OTLPValue)] = []
        converted.reserveCapacity(attributes.count)
        attributes.forEach { key, attribute in converted.append((key, OTLPValue(attribute))) }
        return converted
    }

    static func attributesSize(_ attributes: [(key: String, value: OTLPValue)]) -> Int {
        attributes.reduce(0) { $0 + fieldSize(keyValueSize($1.key, $1.value)) }
    }

    mutating func attributes(_ field: UInt64, _ attributes: [(key: String, value: OTLPValue)]) {
        for attribute in attributes { keyValue(field, attribute.key, attribute.value) }
    }

    // MARK: - A span

    /// The fields of a `Span` message (`trace.v1.Span`), without its own tag and length.
    mutating func span(_ span: FinishedSpan) {
        ids(1, span.identity.traceID.high, span.identity.traceID.low)
        ids(2, span.identity.spanID)
        if let parent = span.parentSpanID { ids(4, parent) }
        string(5, span.name)
        varintField(6, span.kind.otlpValue)
        fixed64(7, span.startNanoseconds)
        fixed64(8, span.endNanoseconds)
        attributes(9, span.attributes)
        for event in span.events {
            let eventAttributes = Self.converted(event.attributes)
            lengthDelimited(
                11, size: 9 + Self.fieldSize(event.name.utf8.count) + Self.attributesSize(eventAttributes))
            fixed64(1, event.nanosecondsSinceEpoch)
            string(2, event.name)
            attributes(3, eventAttributes)
        }
        for link in span.links {
            guard let linked = link.context.spanIdentity else { continue }
            let linkAttributes = Self.converted(link.attributes)
            lengthDelimited(13, size: Self.fieldSize(16) + Self.fieldSize(8) + Self.attributesSize(linkAttributes) + 5)
            ids(1, linked.traceID.high, linked.traceID.low)
            ids(2, linked.spanID)
            attributes(4, linkAttributes)
            fixed32(6, UInt32(linked.flags))
        }
        if let status = span.status {
            // The specification: a description goes with an error status only.
            let message = status.code == .error ? status.message ?? "" : ""
            let code = status.code.otlpValue
            lengthDelimited(
                15, size: (message.isEmpty ? 0 : Self.fieldSize(message.utf8.count)) + 1 + Self.varintSize(code))
            if !message.isEmpty { string(2, message) }
            varintField(3, code)
        }
        fixed32(16, UInt32(span.identity.flags))
    }
}

import WalletRouting

/// What a collector said it did not take of an export it accepted: OTLP's partial success, the
/// `ExportTraceServiceResponse.partial_success` of a 2xx answer (https://opentelemetry.io/docs/specs/otlp/#partial-success).
struct OTLPPartialSuccess: Equatable, Sendable {
    var rejectedSpans: Int
    var message: String

    /// The partial success in a response body, when it rejected any span; nil for a full success, an empty body or
    /// one that does not parse (the export was accepted either way).
    static func parse(_ body: [UInt8], contentType: String?) -> OTLPPartialSuccess? {
        guard !body.isEmpty else { return nil }
        let found =
            contentType?.lowercased().hasPrefix("application/json") == true ? fromJSON(body) : fromProtobuf(body)
        guard let found, found.rejectedSpans > 0 else { return nil }
        return found
    }

    /// `{"partialSuccess": {"rejectedSpans": "3", "errorMessage": "…"}}` (an int64 may be a string or a number).
    private static func fromJSON(_ body: [UInt8]) -> OTLPPartialSuccess? {
        guard case .object(let response)? = try? JSONParser.parse(body),
            case .object(let partial)? = response["partialSuccess"]
        else { return nil }
        let rejected: Int? =
            switch partial["rejectedSpans"] {
            case .number(let number)?: number.intValue
            case .string(let text)?: Int(text)
            default: nil
            }
        return OTLPPartialSuccess(rejectedSpans: rejected ?? 0, message: partial["errorMessage"]?.stringValue ?? "")
    }

    /// Field 1 of the response, `ExportTracePartialSuccess`: `rejected_spans` (1, int64) and `error_message` (2).
    private static func fromProtobuf(_ body: [UInt8]) -> OTLPPartialSuccess? {
        var reader = WireReader(bytes: body[...])
        var result: OTLPPartialSuccess?
        while let (field, value) = reader.next() {
            guard field == 1, case .bytes(let partial) = value else { continue }
            var inner = WireReader(bytes: partial)
            var found = OTLPPartialSuccess(rejectedSpans: 0, message: "")
            while let (innerField, innerValue) = inner.next() {
                switch (innerField, innerValue) {
                case (1, .varint(let count)): found.rejectedSpans = Int(truncatingIfNeeded: count)
                case (2, .bytes(let text)): found.message = String(decoding: text, as: UTF8.self)
                default: break
                }
            }
            result = found
        }
        return reader.isMalformed ? nil : result
    }

    /// Protobuf's wire format, read field by field; stops (and says so) at the first malformed byte.
    private struct WireReader {
        enum Value {
            case varint(UInt64)
            case bytes(ArraySlice<UInt8>)
            case other
        }

        var bytes: ArraySlice<UInt8>
        private(set) var isMalformed = false

        init(bytes: ArraySlice<UInt8>) { self.bytes = bytes }

        mutating func next() -> (UInt64, Value)? {
            guard !bytes.isEmpty, !isMalformed else { return nil }
            guard let key = varint() else { return malformed() }
            switch key & 7 {
            case 0:
                guard let value = varint() else { return malformed() }
                return (key >> 3, .varint(value))
            case 1, 5:
                let size = key & 7 == 1 ? 8 : 4
                guard bytes.count >= size else { return malformed() }
                bytes = bytes.dropFirst(size)
                return (key >> 3, .other)
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count) else { return malformed() }
                let value = bytes.prefix(Int(length))
                bytes = bytes.dropFirst(Int(length))
                return (key >> 3, .bytes(value))
            default: return malformed()
            }
        }

        private mutating func malformed() -> (UInt64, Value)? {
            isMalformed = true
            return nil
        }

        private mutating func varint() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = bytes.first, shift < 64 {
                bytes = bytes.dropFirst()
                result |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return result }
                shift += 7
            }
            return nil
        }
    }
}

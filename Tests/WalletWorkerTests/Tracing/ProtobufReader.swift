/// Reads protobuf's wire format, for checking what the span exporter writes: a message as its fields, in order.
struct ProtobufReader {
    enum Value: Equatable {
        case varint(UInt64)
        case fixed64(UInt64)
        case fixed32(UInt32)
        case bytes([UInt8])
    }

    struct ReadError: Error, CustomStringConvertible {
        var description: String
    }

    /// The fields of `bytes`, each as its number and value; throws on a truncated or malformed message.
    static func fields(_ bytes: [UInt8]) throws -> [(number: UInt64, value: Value)] {
        var fields: [(number: UInt64, value: Value)] = []
        var offset = 0
        func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard offset < bytes.count, shift < 64 else { throw ReadError(description: "truncated varint") }
                let byte = bytes[offset]
                offset += 1
                result |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return result }
                shift += 7
            }
        }
        func take(_ count: Int) throws -> [UInt8] {
            guard count >= 0, offset + count <= bytes.count else { throw ReadError(description: "truncated field") }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }
        func littleEndian(_ raw: [UInt8]) -> UInt64 {
            raw.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }
        while offset < bytes.count {
            let key = try varint()
            switch key & 7 {
            case 0: fields.append((key >> 3, .varint(try varint())))
            case 1: fields.append((key >> 3, .fixed64(littleEndian(try take(8)))))
            case 2: fields.append((key >> 3, .bytes(try take(Int(try varint())))))
            case 5: fields.append((key >> 3, .fixed32(UInt32(littleEndian(try take(4))))))
            default: throw ReadError(description: "wire type \(key & 7)")
            }
        }
        return fields
    }

    /// The length-delimited fields numbered `number`.
    static func messages(_ number: UInt64, in bytes: [UInt8]) throws -> [[UInt8]] {
        try fields(bytes).compactMap { field in
            if field.number == number, case .bytes(let payload) = field.value { payload } else { nil }
        }
    }

    /// The first field numbered `number`.
    static func field(_ number: UInt64, in bytes: [UInt8]) throws -> Value? {
        try fields(bytes).first { $0.number == number }?.value
    }

    static func string(_ number: UInt64, in bytes: [UInt8]) throws -> String? {
        guard case .bytes(let payload)? = try field(number, in: bytes) else { return nil }
        return String(decoding: payload, as: UTF8.self)
    }

    static func hex(_ number: UInt64, in bytes: [UInt8]) throws -> String? {
        guard case .bytes(let payload)? = try field(number, in: bytes) else { return nil }
        return payload.map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0xf)]])
        }.joined()
    }

    /// The spans of an `ExportTraceServiceRequest`, with the resource's attributes.
    static func spans(ofRequest bytes: [UInt8]) throws -> (resource: [String: Value], spans: [[UInt8]]) {
        var resource: [String: Value] = [:]
        var spans: [[UInt8]] = []
        for resourceSpans in try messages(1, in: bytes) {
            for resourceMessage in try messages(1, in: resourceSpans) {
                resource.merge(try attributes(1, in: resourceMessage)) { $1 }
            }
            for scopeSpans in try messages(2, in: resourceSpans) {
                spans += try messages(2, in: scopeSpans)
            }
        }
        return (resource, spans)
    }

    /// The `KeyValue`s numbered `number`, each value as its `AnyValue` field (a string's bytes, an int's varint…).
    static func attributes(_ number: UInt64, in bytes: [UInt8]) throws -> [String: Value] {
        var attributes: [String: Value] = [:]
        for keyValue in try messages(number, in: bytes) {
            guard let key = try string(1, in: keyValue), case .bytes(let anyValue)? = try field(2, in: keyValue),
                let value = try fields(anyValue).first?.value
            else { throw ReadError(description: "a KeyValue without a key or value") }
            attributes[key] = value
        }
        return attributes
    }
}

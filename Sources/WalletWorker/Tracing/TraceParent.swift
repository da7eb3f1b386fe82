/// The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/#traceparent-header): parsed into
/// the identity a message span continues, and written for one.
enum TraceParent {
    /// The identity `header` carries, when it is a traceparent a message span may continue: `00-<32 hex>-<16 hex>-<2
    /// hex>` in lower case, neither id all zeros; a later version (not `ff`) may append fields after a `-`. Nil
    /// otherwise: a backend sending malformed headers starts new traces, without a warning per message.
    static func parse(_ header: String) -> SpanIdentity? {
        var header = header
        return header.withUTF8 { bytes -> SpanIdentity? in
            guard bytes.count >= 55, bytes[2] == dash, bytes[35] == dash, bytes[52] == dash,
                let version = hex(bytes, 0, 2), version != 0xff,
                let traceHigh = hex(bytes, 3, 16), let traceLow = hex(bytes, 19, 16),
                let spanID = hex(bytes, 36, 16), let flags = hex(bytes, 53, 2)
            else { return nil }
            if version == 0 {
                guard bytes.count == 55 else { return nil }
            } else if bytes.count > 55 {
                guard bytes[55] == dash else { return nil }
            }
            guard traceHigh != 0 || traceLow != 0, spanID != 0 else { return nil }
            return SpanIdentity(
                traceID: TraceID(high: traceHigh, low: traceLow), spanID: spanID, flags: UInt8(flags), isRemote: true)
        }
    }

    /// The version-00 header of `identity`.
    static func format(_ identity: SpanIdentity) -> String {
        "00-\(identity.traceID.hex)-\(LowerHex.string(identity.spanID))-\(LowerHex.string(UInt64(identity.flags), digits: 2))"
    }

    private static let dash = UInt8(ascii: "-")

    /// The value of `count` lower-case hex digits at `start`; nil when any is not one.
    private static func hex(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ count: Int) -> UInt64? {
        var value: UInt64 = 0
        for byte in bytes[start..<start + count] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte &- UInt8(ascii: "a") &+ 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}

/// Lower-case hexadecimal text of fixed width, as trace and span ids are written.
enum LowerHex {
    static func string(_ value: UInt64, digits: Int = 16) -> String {
        String(unsafeUninitializedCapacity: digits) { buffer in
            write(value, digits: digits, into: buffer)
            return digits
        }
    }

    static func write(_ value: UInt64, digits: Int, into buffer: UnsafeMutableBufferPointer<UInt8>) {
        for index in 0..<digits {
            let nibble = UInt8(truncatingIfNeeded: value >> UInt64((digits - 1 - index) * 4)) & 0xf
            buffer[index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
        }
    }
}

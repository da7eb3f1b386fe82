/// The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/#traceparent-header), checked
/// before it is handed to the tracer: swift-otel logs a warning for every header it cannot parse, and a backend
/// sending malformed headers must not turn into a warning per message.
enum TraceParent {
    /// Whether `header` is a traceparent a message span may continue: `00-<32 hex>-<16 hex>-<2 hex>` in lower case,
    /// neither id all zeros; a later version (not `ff`) may append fields after a `-`.
    static func isValid(_ header: String) -> Bool {
        let bytes = Array(header.utf8)
        guard bytes.count >= 55 else { return false }
        guard isHex(bytes[0..<2]), bytes[2] == dash, isHex(bytes[3..<35]), bytes[35] == dash,
            isHex(bytes[36..<52]), bytes[52] == dash, isHex(bytes[53..<55])
        else { return false }
        let version = bytes[0..<2]
        if version.elementsEqual("ff".utf8) { return false }
        if version.elementsEqual("00".utf8) {
            guard bytes.count == 55 else { return false }
        } else if bytes.count > 55 {
            guard bytes[55] == dash else { return false }
        }
        return !bytes[3..<35].allSatisfy { $0 == zero } && !bytes[36..<52].allSatisfy { $0 == zero }
    }

    private static let dash = UInt8(ascii: "-")
    private static let zero = UInt8(ascii: "0")

    private static func isHex(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.allSatisfy {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
        }
    }
}

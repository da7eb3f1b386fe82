/// A value in an AMQP field table (message headers, queue arguments), every type librabbitmq knows.
public indirect enum AMQPFieldValue: Sendable, Hashable {
    case bool(Bool)
    case int8(Int8)
    case uint8(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case float(Float)
    case double(Double)
    /// AMQP decimal: `value` × 10^-`scale`.
    case decimal(scale: UInt8, value: UInt32)
    case string(String)
    /// A byte array (kind `x`).
    case bytes([UInt8])
    /// A long string (kind `S`) whose bytes are not UTF-8: kept as they came, and sent back as a long string, so a
    /// message the worker copies keeps its headers' kinds byte for byte.
    case undecodedString([UInt8])
    /// Seconds since the Unix epoch.
    case timestamp(UInt64)
    case array([AMQPFieldValue])
    case table(AMQPTable)
    case void
}

/// An AMQP field table: keyed entries in order (order is kept so tables round-trip byte for byte).
public struct AMQPTable: Sendable, Hashable, ExpressibleByDictionaryLiteral {
    public var entries: [(key: String, value: AMQPFieldValue)] {
        get { storage.map { ($0.key, $0.value) } }
        set { storage = newValue.map { Entry(key: $0.key, value: $0.value) } }
    }

    struct Entry: Sendable, Hashable {
        var key: String
        var value: AMQPFieldValue
    }

    var storage: [Entry]

    public init() {
        storage = []
    }

    public init(_ entries: [(key: String, value: AMQPFieldValue)]) {
        storage = entries.map { Entry(key: $0.key, value: $0.value) }
    }

    public init(dictionaryLiteral elements: (String, AMQPFieldValue)...) {
        storage = elements.map { Entry(key: $0.0, value: $0.1) }
    }

    public var isEmpty: Bool { storage.isEmpty }
    public var count: Int { storage.count }

    /// The first entry with this key; setting replaces it or appends.
    public subscript(key: String) -> AMQPFieldValue? {
        get { storage.first { $0.key == key }?.value }
        set {
            if let index = storage.firstIndex(where: { $0.key == key }) {
                if let newValue { storage[index].value = newValue } else { storage.remove(at: index) }
            } else if let newValue {
                storage.append(Entry(key: key, value: newValue))
            }
        }
    }
}

extension AMQPFieldValue {
    /// A string header, whichever AMQP string kind carried it (RabbitMQ writes `S`, some clients `x`); nil for
    /// anything else or bytes that are not UTF-8.
    public var textValue: String? {
        switch self {
        case .string(let value): value
        case .bytes(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }
}

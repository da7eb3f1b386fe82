import AMQPTransport

extension AMQPFieldValue {
    /// A string header, whichever AMQP string kind carried it.
    var textValue: String? {
        switch self {
        case .string(let value): value
        case .bytes(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }
}

extension Duration {
    var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

@testable import AMQPTransport
@testable import WalletWorker

/// Short ways to wait for and read what the worker did at the seam.
extension ScriptedBroker {
    /// Waits until `count` settlements were made in all.
    func waitForSettlements(_ count: Int) async {
        await waitFor(count) { if case .settled = $0 { true } else { false } }
    }

    /// Waits until `count` publishes were made in all.
    func waitForPublishes(_ count: Int) async {
        await waitFor(count) { if case .published = $0 { true } else { false } }
    }

    /// The messages published to `exchange`.
    func published(to exchange: String) -> [AMQPOutboundMessage] {
        published.filter { $0.exchange == exchange }
    }

    /// The messages published to a retry queue whose name starts with `retryQueue` (through the default exchange).
    func retryCopies(_ retryQueue: String = Topology().retryQueue) -> [AMQPOutboundMessage] {
        published.filter { $0.exchange.isEmpty && $0.routingKey.hasPrefix(retryQueue) }
    }

    /// The number of sessions opened so far.
    var sessionsOpened: Int {
        log.filter { if case .opened = $0 { true } else { false } }.count
    }
}

extension AMQPOutboundMessage {
    /// A result (to a result exchange), not a retry copy (the default exchange) nor a dead letter.
    var isResult: Bool {
        !exchange.isEmpty && exchange != Topology().deadLetterExchange
    }

    /// A string header's value.
    func header(_ name: String) -> String? {
        switch properties.headers?[name] {
        case .string(let value)?: value
        default: nil
        }
    }

    /// An integer header's value.
    func integerHeader(_ name: String) -> Int64? {
        switch properties.headers?[name] {
        case .int8(let value)?: Int64(value)
        case .int16(let value)?: Int64(value)
        case .int32(let value)?: Int64(value)
        case .int64(let value)?: value
        default: nil
        }
    }
}

import Foundation

/// The routing core's entry point: a pure function from an inbound message and the current state to a decision.
public struct NotificationRouter: Sendable {
    public var settings: RoutingSettings

    public init(settings: RoutingSettings = RoutingSettings()) {
        self.settings = settings
    }

    /// Decides what one message does. Throws only what `state` throws (a store failure, which is transient).
    /// - Parameter now: the processing time; results carry it as `processedAt`, replenished keys expire from it.
    public func route(_ message: InboundMessage, state: some WalletStateReading, now: Date) throws -> Decision {
        fatalError("routing core under construction (issue 3)")
    }
}

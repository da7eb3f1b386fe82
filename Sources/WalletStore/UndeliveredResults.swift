import Foundation

/// A processed message whose recorded results were never delivered: it was dead-lettered after its effects were
/// committed (its results refused until its attempts ran out, or one of them cannot be published). The store keeps
/// this beside the message's record so that `wallet-worker inspect message` tells it; a replay of the dead letter
/// publishes the recorded results again, and once they are confirmed the worker forgets it.
public struct UndeliveredResults: Sendable, Hashable {
    public var messageID: String
    /// When its dead letter was confirmed.
    public var deadLetteredAt: Date
    /// The dead letter's reason, as `wallet_dead_letters_total` labels it (`retries_exhausted`, `unpublishable`).
    public var reason: String
    /// The error it was dead-lettered with.
    public var error: String

    public init(messageID: String, deadLetteredAt: Date, reason: String, error: String) {
        self.messageID = messageID
        self.deadLetteredAt = deadLetteredAt
        self.reason = reason
        self.error = error
    }
}

/// What the worker tells the store about recorded results once a batch's publishes are confirmed: messages
/// dead-lettered after their effects were committed, and replays whose recorded results were delivered.
public struct ResultDeliveryNote: Sendable, Hashable {
    public var undelivered: [UndeliveredResults]
    /// Message ids whose recorded results a replay delivered: any note of them as undelivered is forgotten.
    public var delivered: [String]

    public init(undelivered: [UndeliveredResults] = [], delivered: [String] = []) {
        self.undelivered = undelivered
        self.delivered = delivered
    }

    public var isEmpty: Bool { undelivered.isEmpty && delivered.isEmpty }
}

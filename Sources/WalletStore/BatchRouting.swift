import Foundation
import WalletRouting

/// A store's view inside one open transaction: the state the router reads, plus what deduplication needs.
/// Synchronous: every implementation runs the whole batch on the connection that holds the transaction.
protocol WalletStoreTransaction: WalletStateReading {
    /// The decision recorded for `messageID`, or nil when the id was never processed (or has expired).
    func recordedDecision(messageID: String) throws -> Decision?
    func apply(_ effects: [Effect]) throws
    /// Records a processed message: its id, when, and what it decided (results, outcome, sender, card).
    func record(messageID: String, decision: Decision, at now: Date) throws
}

/// The rules every store shares for a batch (CONTRACT.md §8, §10), written once.
enum BatchRouting {
    /// - Parameter bodies: the messages' bodies already parsed, by index (`foreseenReads`); nil, or a nil element,
    ///   parses the body while routing.
    static func process(
        _ messages: [InboundMessage], bodies: [ParsedBody?]? = nil, router: NotificationRouter, now: Date,
        in transaction: some WalletStoreTransaction
    ) throws -> [StoredDecision] {
        var decisions: [StoredDecision] = []
        decisions.reserveCapacity(messages.count)
        for (index, message) in messages.enumerated() {
            let messageID = recordedID(of: message)
            if let messageID, var recorded = try transaction.recordedDecision(messageID: messageID) {
                // The same results, but the reply_to copies go to whoever asked this time.
                recorded.results = ReplyCopies.readdressed(recorded.results, to: message.properties.replyTo)
                decisions.append(StoredDecision(decision: recorded, isReplay: true, recordedMessageID: messageID))
                continue
            }
            let decision = try router.route(message, body: bodies?[index], state: transaction, now: now)
            try transaction.apply(decision.effects)
            // Rejected messages are not recorded: replayed from the dead-letter queue they are evaluated afresh.
            // Every rejection is a verdict on the input alone, never on the state: the PostgreSQL store relies on
            // it, reading processed ids in a snapshot that may predate another replica's record of the same id,
            // which the record's unique key then catches for every message recorded here.
            let recordedAs = decision.disposition == .acknowledge ? messageID : nil
            if let recordedAs {
                try transaction.record(messageID: recordedAs, decision: decision, at: now)
            }
            decisions.append(StoredDecision(decision: decision, isReplay: false, recordedMessageID: recordedAs))
        }
        return decisions
    }

    /// The id a message is recorded and deduplicated under: its `message_id`, an empty one counting as absent, as
    /// it does for the router's result ids.
    static func recordedID(of message: InboundMessage) -> String? {
        message.properties.messageID.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// What `process` can read for `messages`, foreseen from the messages alone: the recorded decisions of their
    /// ids and the state their routing can read (`NotificationRouter.foreseeReads`), and the bodies parsed on the
    /// way, by index, for `process`.
    static func foreseenReads(_ messages: [InboundMessage], router: NotificationRouter)
        -> (messageIDs: Set<String>, state: ForeseenReads, bodies: [ParsedBody?])
    {
        var messageIDs = Set<String>(minimumCapacity: messages.count)
        var state = ForeseenReads()
        var bodies: [ParsedBody?] = []
        bodies.reserveCapacity(messages.count)
        for message in messages {
            if let messageID = recordedID(of: message) { messageIDs.insert(messageID) }
            bodies.append(router.foreseeReads(of: message, into: &state))
        }
        return (messageIDs, state, bodies)
    }
}

extension Decision {
    /// What a replay returns: the recorded results and labels, nothing to apply.
    static func recorded(results: [OutboundResult], outcome: Outcome, sender: String?, digitalCardId: String?)
        -> Decision
    {
        Decision(
            effects: [], results: results, disposition: .acknowledge, outcome: outcome, sender: sender,
            digitalCardId: digitalCardId
        )
    }
}

import Foundation
import WalletStore

/// What the store should hear about a recorded message's results once its batch is settled, so that
/// `wallet-worker inspect message` tells the truth about it.
///
/// A message whose effects were committed and which was then dead-lettered (its results refused until its attempts
/// ran out, or a result that cannot be published) is recorded as processed while its results never reached anyone:
/// the store notes it as undelivered. A replay whose recorded results were confirmed delivered them: any such note
/// is forgotten.
enum RecordedResultsDelivery: Sendable, Hashable {
    case undelivered(messageID: String, reason: String, error: String)
    case delivered(messageID: String)

    /// The changes the settled plans of a batch make; empty for nearly every batch (nothing dead-lettered after a
    /// commit, no replay). Whether and under which id a decision is recorded is the store's to say
    /// (`StoredDecision.recordedMessageID`).
    static func changes(settling plans: [DeliveryPlan], except requeued: Set<Int>) -> [RecordedResultsDelivery] {
        var changes: [RecordedResultsDelivery] = []
        // By index: a plan copied out of the array costs a reference count per message, result and string in it.
        for index in plans.indices where !requeued.contains(index) {
            if let reason = plans[index].fate.deadLetterReason {
                guard let messageID = plans[index].committed?.recordedMessageID else { continue }
                changes.append(
                    .undelivered(
                        messageID: messageID, reason: reason.rawValue,
                        error: plans[index].fate.failureDescription ?? ""))
            } else if plans[index].stored?.isReplay == true, case .processed = plans[index].fate,
                let messageID = plans[index].stored?.recordedMessageID
            {
                changes.append(.delivered(messageID: messageID))
            }
        }
        return changes
    }
}

extension [RecordedResultsDelivery] {
    /// The store's note of these changes, the dead letters dated `now`.
    func note(at now: Date) -> ResultDeliveryNote {
        var note = ResultDeliveryNote()
        for change in self {
            switch change {
            case .undelivered(let messageID, let reason, let error):
                note.undelivered.append(
                    UndeliveredResults(messageID: messageID, deadLetteredAt: now, reason: reason, error: error))
            case .delivered(let messageID):
                note.delivered.append(messageID)
            }
        }
        return note
    }
}

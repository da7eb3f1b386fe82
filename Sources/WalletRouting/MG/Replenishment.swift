import Foundation

/// MG notifications: payment key replenishment requested by the token service provider (CONTRACT.md §5).
///
/// Always forced (`isForced: true`, as the vendor's handler does). An active card gets fresh keys and a
/// `replenished` outcome with `keyInfo`; a suspended card fails with `replenishmentNotAllowed`; an absent or
/// deleted card fails with `unknownDigitalCardID`.
extension NotificationRouter {
    func routeReplenishment(
        fields: NotificationFields, state: some WalletStateReading, now: Date, envelope: inout ResultEnvelope
    ) throws -> Handled {
        guard fields.carriesRequiredAction(of: .mg) else {
            throw Rejection("action must be MG:ReplenishmentNeededNotification for sender MG")
        }
        guard let digitalCardId = fields.digitalCardIdString else {
            throw Rejection("digitalCardId is missing: a non-empty string is required for sender MG")
        }

        let card = try state.card(digitalCardId)
        let exchange = settings.exchanges.replenishment
        guard var card, card.state == .active else {
            let (kind, message) =
                card?.state == .suspended
                ? ("replenishmentNotAllowed", "replenishment is not allowed on a suspended card")
                : ("unknownDigitalCardID", card == nil ? "the digital card is unknown" : "the digital card is deleted")
            envelope.publish(.replenishmentOutcome, exchange: exchange, routingKey: "replenishment.failed") {
                $0.key("digitalCardId")
                $0.string(digitalCardId)
                $0.key("isForced")
                $0.bool(true)
                $0.key("outcome")
                $0.string("failed")
                $0.key("error")
                $0.beginObject()
                $0.key("kind")
                $0.string(kind)
                $0.key("message")
                $0.string(message)
                $0.endObject()
            }
            return Handled(effects: [], outcome: .domainError)
        }

        let keys = freshPaymentKeys(now: now)
        card.paymentKeys = keys
        envelope.publish(.replenishmentOutcome, exchange: exchange, routingKey: "replenishment.replenished") {
            $0.key("digitalCardId")
            $0.string(digitalCardId)
            $0.key("isForced")
            $0.bool(true)
            $0.key("outcome")
            $0.string("replenished")
            $0.key("keyInfo")
            $0.beginObject()
            $0.key("numberOfPaymentsLeft")
            $0.int(keys.numberOfPaymentsLeft)
            $0.key("expiryDate")
            $0.utcTimestamp(epochSeconds: keys.expiresAt)
            $0.key("needsReplenishment")
            $0.bool(false)
            $0.key("keyType")
            $0.string(card.keyType.rawValue)
            $0.endObject()
        }
        return Handled(effects: [.upsertCard(card)], outcome: .processed)
    }

    /// A full batch of keys valid from `now` (also used by CPS `requestReplenishKeys`).
    func freshPaymentKeys(now: Date) -> PaymentKeyInfo {
        PaymentKeyInfo(
            numberOfPaymentsLeft: settings.paymentKeyBatchSize,
            expiresAt: now.timeIntervalSince1970 + settings.paymentKeyValiditySeconds
        )
    }
}

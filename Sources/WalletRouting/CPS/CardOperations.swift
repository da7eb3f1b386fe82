import Foundation

/// CPS notifications: digital card operations (CONTRACT.md §3).
///
/// The payload's server messages are applied in order against the card's state (see `CardLifecycle`). Each
/// applied message publishes a `serverMessage` event; a refused one stops the stack with `errorEncountered`
/// (messages applied before it stay applied); a stack that ran to its end publishes `completed`. A payload
/// with no usable stack or no `digitalCardId` publishes `unsupportedPushContent` and is acknowledged.
extension NotificationRouter {
    func routeCardOperations(
        _ payload: JSONObject, fields: NotificationFields, state: some WalletStateReading, now: Date,
        envelope: inout ResultEnvelope
    ) throws -> Handled {
        let exchange = settings.exchanges.events
        guard let stack = ServerMessage.stack(of: payload), let digitalCardId = fields.digitalCardIdString else {
            envelope.publish(.cardEvent, exchange: exchange, routingKey: "card.unsupportedPushContent") {
                $0.key("event")
                $0.string("unsupportedPushContent")
                $0.key("digitalCardId")
                $0.string(fields.digitalCardIdString)
                $0.key("payload")
                $0.value(.object(payload))
            }
            return Handled(effects: [], outcome: .processed)
        }

        let payloadTokenizedCardId: String? =
            if case .string(let value)? = payload["tokenizedCardId"], !value.isEmpty { value } else { nil }
        let original = try state.card(digitalCardId)
        var card = original

        func effects() -> [Effect] {
            guard let card, card != original else { return [] }
            return [.upsertCard(card)]
        }

        for message in stack {
            let previousState = card?.state
            let knownMessage = message.knownMessage
            if let knownMessage {
                switch CardLifecycle.transition(knownMessage, from: previousState) {
                case .refused(let error):
                    envelope.publish(.cardEvent, exchange: exchange, routingKey: "card.errorEncountered") {
                        $0.key("event")
                        $0.string("errorEncountered")
                        $0.key("digitalCardId")
                        $0.string(digitalCardId)
                        $0.key("tokenizedCardId")
                        $0.string(payloadTokenizedCardId ?? card?.tokenizedCardId)
                        $0.key("serverMessage")
                        message.write(to: &$0)
                        $0.key("knownMessage")
                        $0.string(knownMessage.rawValue)
                        $0.key("state")
                        $0.string(previousState?.rawValue)
                        $0.key("error")
                        $0.beginObject()
                        $0.key("kind")
                        $0.string(error.kind)
                        $0.key("code")
                        $0.int(error.code)
                        $0.key("message")
                        $0.string(Self.describe(error, knownMessage: knownMessage, state: previousState))
                        $0.endObject()
                    }
                    return Handled(effects: effects(), outcome: .domainError)
                case .moves(let nextState):
                    if card == nil {
                        card = CardRecord(
                            digitalCardId: digitalCardId, state: nextState, keyType: Self.keyType(in: payload)
                        )
                    } else {
                        card?.state = nextState
                    }
                    if knownMessage == .requestReplenishKeys {
                        // Refreshed as MG does (§5), without a replenishmentOutcome.
                        card?.paymentKeys = freshPaymentKeys(now: now)
                    }
                }
            }
            // The message applied: an existing card records the payload's tokenizedCardId.
            if let payloadTokenizedCardId, card != nil {
                card?.tokenizedCardId = payloadTokenizedCardId
            }
            envelope.publish(
                .cardEvent, exchange: exchange,
                routingKey: knownMessage?.routingKey ?? "card.serverMessage.informational"
            ) {
                $0.key("event")
                $0.string("serverMessage")
                $0.key("digitalCardId")
                $0.string(digitalCardId)
                $0.key("tokenizedCardId")
                $0.string(payloadTokenizedCardId ?? card?.tokenizedCardId)
                $0.key("serverMessage")
                message.write(to: &$0)
                $0.key("knownMessage")
                $0.string(knownMessage?.rawValue)
                $0.key("previousState")
                $0.string(previousState?.rawValue)
                $0.key("state")
                $0.string(card?.state.rawValue)
                $0.key("changed")
                $0.bool(previousState != card?.state)
            }
        }

        envelope.publish(.cardEvent, exchange: exchange, routingKey: "card.completed") {
            $0.key("event")
            $0.string("completed")
            $0.key("digitalCardId")
            $0.string(digitalCardId)
            $0.key("tokenizedCardId")
            $0.string(payloadTokenizedCardId ?? card?.tokenizedCardId)
            $0.key("state")
            $0.string(card?.state.rawValue)
        }
        return Handled(effects: effects(), outcome: .processed)
    }

    /// `keyType` on the install that creates the card: `SUK` or `LUK`, case-insensitive; anything else is `SUK`.
    private static func keyType(in payload: JSONObject) -> KeyType {
        guard case .string(let value)? = payload["keyType"] else { return .suk }
        return ASCIICase.equals(value, "LUK") ? .luk : .suk
    }

    private static func describe(
        _ error: CardLifecycle.LifecycleError, knownMessage: KnownMessage, state: CardState?
    ) -> String {
        switch error {
        case .unknownDigitalCardID:
            "\(knownMessage.rawValue) refused: the digital card is unknown"
        case .cardStateDoesNotAllowRequestedOperation:
            "\(knownMessage.rawValue) refused: not allowed for a card in state \(state?.rawValue ?? "absent")"
        }
    }
}

import Foundation

/// The routing core's entry point: a pure function from an inbound message and the current state to a decision.
///
/// No I/O, no logging, no clock: the caller passes the state to read and the processing time. The order of
/// checks is the contract's: size, UTF-8 and JSON, object (§2, §8); then device installations by AMQP `type`
/// (§7); then routing on `sender` (§3-§6).
public struct NotificationRouter: Sendable {
    public var settings: RoutingSettings

    public init(settings: RoutingSettings = RoutingSettings()) {
        self.settings = settings
    }

    /// AMQP `type` values that select device installations (matched exactly).
    public static let deviceInstallationType = "DeviceInstallation"
    public static let deviceInstallationDeletedType = "DeviceInstallationDeleted"

    /// Decides what one message does. Throws only what `state` throws (a store failure, which is transient).
    /// - Parameter now: the processing time; results carry it as `processedAt`, replenished keys expire from it.
    public func route(_ message: InboundMessage, state: some WalletStateReading, now: Date) throws -> Decision {
        try route(message, body: nil, state: state, now: now)
    }

    /// The same, with the body already parsed (`ParsedBody`, made from `message.body`); nil parses it here.
    public func route(_ message: InboundMessage, body parsed: ParsedBody?, state: some WalletStateReading, now: Date)
        throws -> Decision
    {
        var envelope = ResultEnvelope(inbound: message.properties, now: now)

        if let rejection = rejectionBeforeTheBody(message) {
            return rejected(rejection, envelope: envelope)
        }
        let body: JSONValue
        switch (parsed ?? ParsedBody(message.body)).value {
        case .success(let value):
            body = value
        case .failure(let error):
            return rejected(.notJSON(error, body: message.body), envelope: envelope)
        }
        guard case .object(let payload) = body else {
            return rejected(.notAnObject, envelope: envelope)
        }

        // Installations are told apart by the AMQP type, whatever the body says; their results carry no sender.
        switch message.properties.type {
        case Self.deviceInstallationType?:
            let handled = routeDeviceInstallation(payload, deleted: false, envelope: &envelope)
            return decision(handled, envelope: envelope, digitalCardId: nil)
        case Self.deviceInstallationDeletedType?:
            let handled = routeDeviceInstallation(payload, deleted: true, envelope: &envelope)
            return decision(handled, envelope: envelope, digitalCardId: nil)
        default:
            break
        }

        let fields = NotificationFields(payload)
        envelope.sender = fields.senderLabel
        let digitalCardId = fields.digitalCardIdString
        let unpublished = envelope
        do {
            let handled: Handled =
                switch fields.senderString.flatMap(SDKSender.init) {
                case .cps?:
                    try routeCardOperations(payload, fields: fields, state: state, now: now, envelope: &envelope)
                case .tns?:
                    try routeTransactionNotification(payload, fields: fields, state: state, envelope: &envelope)
                case .mg?:
                    try routeReplenishment(fields: fields, state: state, now: now, envelope: &envelope)
                case nil:
                    try routeActionNotification(payload, fields: fields, envelope: &envelope)
                }
            return decision(handled, envelope: envelope, digitalCardId: digitalCardId)
        } catch let rejection as Rejection {
            // Bad input is found before anything is published, so the rejection is the only result.
            return rejected(rejection, envelope: unpublished, digitalCardId: digitalCardId)
        }
    }

    /// The envelope first: ids that cannot name results, then the size (a body over it may not even be here).
    func rejectionBeforeTheBody(_ message: InboundMessage) -> Rejection? {
        if message.properties.messageIDIsInvalidUTF8 {
            return .messageIDNotUTF8
        }
        if message.properties.correlationIDIsInvalidUTF8 {
            return .correlationIDNotUTF8
        }
        if let id = message.properties.messageID, id.utf8.count > RoutingSettings.maximumMessageIDBytes {
            return .messageIDTooLong(byteCount: id.utf8.count, limit: RoutingSettings.maximumMessageIDBytes)
        }
        guard message.bodyByteCount <= UInt64(settings.maximumBodyBytes) else {
            return .bodyTooLarge(byteCount: message.bodyByteCount, limit: settings.maximumBodyBytes)
        }
        return nil
    }

    private func decision(_ handled: Handled, envelope: ResultEnvelope, digitalCardId: String?) -> Decision {
        Decision(
            effects: handled.effects, results: envelope.results, disposition: .acknowledge,
            outcome: handled.outcome, sender: envelope.sender, digitalCardId: digitalCardId
        )
    }
}

/// What a sender's rules decided, before the results are packed into a `Decision` (always acknowledged:
/// bad input is thrown as a `Rejection` instead).
struct Handled {
    var effects: [Effect]
    var outcome: Outcome
}

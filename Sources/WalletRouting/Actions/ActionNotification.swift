/// Non-SDK notifications (CONTRACT.md §6): a `sender` that is absent or not CPS, TNS or MG.
///
/// With a non-empty string `action` (the backend's template puts it beside `aps`), an `actionTriggered`
/// result: the action as received, `silent` when `aps` has `content-available` equal to the integer 1 and no
/// `alert`, and `message` (`aps.alert`, string or object, else the top-level `message`, else null). An action
/// longer than the limit (200 UTF-8 bytes, which keeps `action.<action>` a valid routing key) is bad input.
/// Without an action the notification is ignored: acknowledged, nothing published.
extension NotificationRouter {
    func routeActionNotification(
        _ payload: JSONObject, fields: NotificationFields, envelope: inout ResultEnvelope
    ) throws(Rejection) -> Handled {
        guard let action = fields.actionString, !action.isEmpty else {
            return Handled(effects: [], outcome: .ignored)
        }
        let byteCount = action.utf8.count
        guard byteCount <= settings.maximumActionBytes else {
            throw Rejection("action is \(byteCount) bytes, over the limit of \(settings.maximumActionBytes) bytes")
        }

        let aps = payload["aps"]?.objectValue
        let alert = aps?["alert"]
        // Any non-null `alert` makes the push visible, so it is not silent; only a string or an object (what
        // APNs accepts) is echoed as the message.
        let hasAlert = alert.map { !$0.isNull } ?? false
        let contentAvailable = aps?["content-available"]?.numberValue?.literal == "1"
        let message: JSONValue? =
            switch alert {
            case .string?, .object?: alert
            default: payload["message"].flatMap { $0.isNull ? nil : $0 }
            }

        envelope.publish(.actionTriggered, exchange: settings.exchanges.actions, routingKey: "action.\(action)") {
            $0.key("action")
            $0.string(action)
            $0.key("silent")
            $0.bool(contentAvailable && !hasAlert)
            $0.key("message")
            if let message { $0.value(message) } else { $0.null() }
        }
        return Handled(effects: [], outcome: .processed)
    }
}

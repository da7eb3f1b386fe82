/// Bad input (CONTRACT.md §8): the message gets a `rejected` result with this `reason` and is dead-lettered
/// with the same reason in `x-worker-error`. Reasons name the offending field and never echo its value
/// (values may be large or sensitive).
struct Rejection: Error, Hashable {
    var reason: String

    init(_ reason: String) {
        self.reason = reason
    }

    static func bodyTooLarge(byteCount: UInt64, limit: Int) -> Rejection {
        Rejection("body is \(byteCount) bytes, over the limit of \(limit) bytes")
    }

    static func messageIDTooLong(byteCount: Int, limit: Int) -> Rejection {
        Rejection(
            "message_id is \(byteCount) bytes, over the limit of \(limit) bytes (result ids <message_id>/<n> must fit "
                + "an AMQP short string of 255 bytes)")
    }

    static let messageIDNotUTF8 = Rejection("message_id is not valid UTF-8 (ids are compared byte for byte)")
    static let correlationIDNotUTF8 = Rejection(
        "correlation_id is not valid UTF-8 (results copy it into JSON, which cannot hold it byte for byte)")

    /// The parser stops at the first problem; a body that is not UTF-8 is reported as such even when the
    /// parser tripped over something else first (this costs a pass only on the error path).
    static func notJSON(_ error: JSONParseError, body: [UInt8]) -> Rejection {
        if error.reason != .invalidUTF8, String(validating: body, as: UTF8.self) == nil {
            return Rejection("body is not valid UTF-8")
        }
        return Rejection(error.description)
    }

    static let notAnObject = Rejection("body is not a JSON object")
}

extension NotificationRouter {
    /// The decision for bad input: one `rejected` result to the events exchange, then a dead letter.
    func rejected(
        _ rejection: Rejection, envelope: ResultEnvelope, digitalCardId: String? = nil
    ) -> Decision {
        var envelope = envelope
        envelope.publish(.rejected, exchange: settings.exchanges.events, routingKey: "notification.rejected") {
            $0.key("reason")
            $0.string(rejection.reason)
        }
        return Decision(
            effects: [], results: envelope.results, disposition: .deadLetter(reason: rejection.reason),
            outcome: .rejected, sender: envelope.sender, digitalCardId: digitalCardId
        )
    }
}

/// The `reply_to` copies of a message's results (CONTRACT.md §1): an identical copy of each primary result on the
/// default exchange, routing key = `reply_to`, right after its primary.
public enum ReplyCopies {
    /// `results` with their copies addressed to `replyTo`, whoever they were addressed to before: a redelivery
    /// replays the results recorded for the first delivery, whose requester may have gone, and the one waiting
    /// now is this delivery's. No copies when `replyTo` is nil or empty.
    public static func readdressed(_ results: [OutboundResult], to replyTo: String?) -> [OutboundResult] {
        let replyTo = replyTo.flatMap { $0.isEmpty ? nil : $0 }
        var readdressed: [OutboundResult] = []
        readdressed.reserveCapacity(results.count)
        for result in results where !isCopy(result) {
            readdressed.append(result)
            if let replyTo { readdressed.append(copy(of: result, to: replyTo)) }
        }
        return readdressed
    }

    static func copy(of primary: OutboundResult, to replyTo: String) -> OutboundResult {
        OutboundResult(exchange: "", routingKey: replyTo, body: primary.body, properties: primary.properties)
    }

    /// Primary results go to the named result exchanges; only copies use the default exchange.
    static func isCopy(_ result: OutboundResult) -> Bool {
        result.exchange.isEmpty
    }
}

/// The connection's publishes, handed to `ConfirmedPublisher` on the I/O thread: a channel that can no longer be used
/// answers the batch at once, and an error while sending fails the whole connection.
extension ConnectionCore {
    /// Publishes the messages and registers a waiter resumed when the broker has confirmed (or nacked,
    /// or returned) every one of them, or when `timeout` passes. Held instead while the broker blocks the connection.
    func publish(
        _ messages: [AMQPOutboundMessage], channel reference: ChannelReference, timeout: Duration,
        confirms: AMQPPendingConfirms
    ) {
        let channel: ChannelState
        do throws(AMQPError) { channel = try usableChannel(reference) } catch {
            // Always answered here: this batch is in no waiter list yet, so a connection that has already failed
            // (an earlier command of the same hand-over failed it, or it is terminating) would never answer it.
            // `usableChannel` throws the connection's own error then; the first settlement wins.
            confirms.resume(throwing: error)
            return
        }
        do throws(AMQPError) {
            try publisher.publish(messages, on: channel, timeout: timeout, confirms: confirms)
        } catch { fail(error) }
    }

    /// Publishes without waiting for anything (no confirm mode needed).
    func publishUnconfirmed(_ message: AMQPOutboundMessage, channel reference: ChannelReference) throws(AMQPError) {
        let channel = try usableChannel(reference)
        if let problem = message.encodingProblem(frameMax: frameMax) {
            throw AMQPError(code: .invalidArgument, message: "not published to '\(message.exchange)': \(problem)")
        }
        do throws(AMQPError) { try publisher.publishUnconfirmed(message, on: channel) } catch {
            fail(error)
            throw error
        }
    }
}

/// Publishing with confirms on one connection: registers each batch with its waiter (`ConfirmWaiters`), sends it
/// now or holds it while the broker blocks the connection, records every message sent for confirm tracking on its
/// channel (`PublisherConfirms`), and answers the waiters as the broker resolves their publishes.
///
/// Every error it throws means writing to the socket failed: the connection must fail with it, which answers every
/// waiter. Used on the connection's I/O thread only.
final class ConfirmedPublisher {
    typealias Waiters = ConfirmWaiters<ContinuousClock>

    private var writer: PublishWriter
    private var waiters: Waiters

    init(writer: PublishWriter, clock: ContinuousClock = ContinuousClock()) {
        self.writer = writer
        self.waiters = Waiters(clock: clock)
    }

    /// Registers a batch and sends it, or holds it while the connection is blocked. A channel not in confirm mode, or
    /// an empty batch, is answered at once.
    func publish(
        _ messages: [AMQPOutboundMessage], on channel: ChannelState, timeout: Duration, confirms: AMQPPendingConfirms
    ) throws(AMQPError) {
        guard channel.confirms != nil else {
            return confirms.resume(
                throwing: AMQPError(
                    code: .invalidArgument,
                    message: "channel \(channel.number) is not in confirm mode; call enableConfirms() first"))
        }
        guard !messages.isEmpty else { return confirms.resume(returning: []) }
        if case .send(let batch) = waiters.admit(messages, channel: channel.number, timeout: timeout, pending: confirms)
        {
            try send(messages, batch: batch, on: channel)
        }
    }

    /// Sends a registered batch and records each message for confirm tracking. A message AMQP cannot encode is not
    /// sent: it settles at once as `.unencodable`, and the rest go on.
    private func send(_ messages: [AMQPOutboundMessage], batch: Int, on channel: ChannelState) throws(AMQPError) {
        let unencodable = try writer.write(messages, channel: channel.number)
        var settled: [PublisherConfirms.Resolution] = []
        for index in messages.indices {
            if let problem = unencodable[index] {
                settled.append(.init(batch: batch, index: index, outcome: .unencodable(reason: problem)))
                continue
            }
            channel.confirms!.published(
                batch: batch, index: index, exchange: messages[index].exchange, routingKey: messages[index].routingKey,
                body: messages[index].body, properties: messages[index].properties)
        }
        resolve(settled)
    }

    /// Writes one message nobody waits for. On a channel in confirm mode the broker still numbers it, so it is
    /// counted (with no batch) to keep later confirms aligned. The caller has checked that AMQP can encode it.
    func publishUnconfirmed(_ message: AMQPOutboundMessage, on channel: ChannelState) throws(AMQPError) {
        try writer.writeThroughLibrary(message, channel: channel.number)
        channel.confirms?.published(
            batch: Waiters.unwatchedBatch, index: 0, exchange: message.exchange, routingKey: message.routingKey,
            body: message.body, properties: message.properties)
    }

    /// Answers the waiters whose batches these resolutions complete.
    func resolve(_ resolutions: [PublisherConfirms.Resolution]) {
        for settlement in waiters.resolve(resolutions) { settlement.deliver() }
    }

    /// connection.blocked: later batches are held in Swift instead of filling the socket.
    func block() {
        waiters.block()
    }

    /// connection.unblocked: sends what was held, in order, on the channels still open (`channel` looks them up).
    func unblock(channel: (UInt16) -> ChannelState?) throws(AMQPError) {
        for held in waiters.unblock() where waiters.isWaiting(batch: held.batch) {
            guard let open = channel(held.channel) else { continue }
            try send(held.messages, batch: held.batch, on: open)
        }
    }

    /// Fails every waiter: the connection ended.
    func failAll(_ error: AMQPError) {
        for settlement in waiters.failAll(error) { settlement.deliver() }
    }

    /// Fails the waiters of one channel: it closed.
    func failChannel(_ number: UInt16, _ error: AMQPError) {
        for settlement in waiters.failChannel(number, error) { settlement.deliver() }
    }

    /// Answers overdue waiters with a timeout, and stops tracking their publishes (`channel` looks channels up).
    func expireOverdue(channel: (UInt16) -> ChannelState?) {
        for expiry in waiters.expireOverdue() {
            channel(expiry.channel)?.confirms?.abandon(batch: expiry.batch)
            expiry.settlement.deliver()
        }
    }

    /// How long until the next confirm deadline, at most `limit`.
    func timeUntilNextDeadline(atMost limit: Duration) -> Duration {
        waiters.timeUntilNextDeadline(atMost: limit)
    }
}

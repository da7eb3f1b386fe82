/// The bookkeeping of a connection's channels and consumers: which numbers are open and by which incarnation,
/// why each retired channel ended, and which consumer receives the deliveries of which (channel, tag).
///
/// Pure: no C and no I/O, so its rules (numbers handed out round-robin, ids never reused, a bounded memory of
/// retired channels, consumer tags unique per channel only) are unit-tested without a broker. The connection's
/// I/O thread owns it, like everything of a `ConnectionCore`; the C calls that open and close channels stay there.
struct ChannelTable {
    /// The open channels by number (a closed channel leaves; why it ended goes to `retired`).
    private var openChannels: [UInt16: ChannelState] = [:]
    /// Why each retired channel ended, by channel id: a stale `AMQPChannel` keeps reporting its own close error
    /// even after its number was reused. Bounded: the oldest entries are dropped.
    private var retired: [Int: AMQPError] = [:]
    private var nextChannelID = 1
    /// Channel numbers are handed out round-robin, so a number is reused as late as possible (frames of a
    /// closed channel may still sit in librabbitmq's queue).
    private var lastChannelNumber: UInt16 = 0
    /// Consumer tags are unique per channel only, so consumers are keyed by both.
    private(set) var consumers: [ConsumerKey: ConsumerSink] = [:]

    /// How many retired channels' errors are remembered (a few hundred kilobytes at most).
    static let retiredLimit = 4096

    // MARK: - Channels

    subscript(number: UInt16) -> ChannelState? { openChannels[number] }

    /// The open channel numbers, lowest first (the order a polite close goes in).
    var openNumbers: [UInt16] { openChannels.keys.sorted() }

    /// Takes the next free number after the last one handed out and a new id for it. `negotiatedChannelMax` is
    /// what the broker agreed to at tune time; 0 means no limit but the protocol's.
    mutating func open(negotiatedChannelMax: Int) throws(AMQPError) -> ChannelReference {
        let maximum = negotiatedChannelMax == 0 ? Int(UInt16.max) : negotiatedChannelMax
        let start = Int(lastChannelNumber)
        guard
            let number = (1...maximum).lazy.map({ UInt16((start + $0 - 1) % maximum + 1) }).first(where: {
                self.openChannels[$0] == nil
            })
        else {
            throw AMQPError(code: .invalidArgument, message: "all \(maximum) channels of the connection are open")
        }
        lastChannelNumber = number
        let reference = ChannelReference(number: number, id: nextChannelID)
        nextChannelID += 1
        openChannels[number] = ChannelState(number: number, id: reference.id)
        return reference
    }

    /// Drops a channel whose open the broker refused: it never existed for anyone to ask about.
    mutating func forget(_ number: UInt16) {
        openChannels[number] = nil
    }

    /// Frees the channel's number once its close handshake is done, remembering why it ended. False when no channel
    /// had that number open.
    @discardableResult
    mutating func retire(_ number: UInt16, because error: AMQPError) -> Bool {
        guard let channel = openChannels.removeValue(forKey: number) else { return false }
        if retired.count >= Self.retiredLimit, let oldest = retired.keys.min() {
            retired[oldest] = nil
        }
        retired[channel.id] = error
        return true
    }

    /// This very channel (not a later one reusing its number), or the error it ended with.
    func usable(_ reference: ChannelReference) throws(AMQPError) -> ChannelState {
        if let channel = openChannels[reference.number], channel.id == reference.id {
            return channel
        }
        throw retired[reference.id] ?? AMQPError(code: .closed, message: "channel \(reference.number) is closed")
    }

    // MARK: - Consumers

    func consumer(channel: UInt16, tag: String) -> ConsumerSink? {
        consumers[ConsumerKey(channel: channel, tag: tag)]
    }

    /// Refuses a tag already consuming on this channel before the broker sees it (reusing a tag is a
    /// connection-level error there). An empty tag asks the broker for a new one, so it is always free.
    func checkTagIsFree(_ tag: String, channel: UInt16) throws(AMQPError) {
        guard !tag.isEmpty, consumers[ConsumerKey(channel: channel, tag: tag)] != nil else { return }
        throw AMQPError(
            code: .invalidArgument, message: "consumer tag '\(tag)' is already consuming on channel \(channel)")
    }

    mutating func register(_ consumer: ConsumerSink) {
        consumers[ConsumerKey(channel: consumer.channel, tag: consumer.tag)] = consumer
        if consumer.automaticAcknowledgement {
            openChannels[consumer.channel]?.automaticAcknowledgementTags.insert(consumer.tag)
        }
    }

    @discardableResult
    mutating func removeConsumer(channel: UInt16, tag: String) -> ConsumerSink? {
        consumers.removeValue(forKey: ConsumerKey(channel: channel, tag: tag))
    }

    /// Removes and returns the consumers of one channel, for the caller to end.
    mutating func removeConsumers(onChannel number: UInt16) -> [ConsumerSink] {
        var removed: [ConsumerSink] = []
        for (key, consumer) in consumers where key.channel == number {
            removed.append(consumer)
            consumers[key] = nil
        }
        return removed
    }

    /// Removes and returns every consumer, for the caller to end.
    mutating func removeAllConsumers() -> [ConsumerSink] {
        defer { consumers.removeAll() }
        return Array(consumers.values)
    }

    /// Where a delivery goes once its content was read. `consumer` is the one registered when its method frame
    /// arrived; the channel is looked up now, as reading the content may have let the channel close meanwhile.
    func destination(ofDeliveryOn number: UInt16, consumerTag tag: String, consumer: ConsumerSink?)
        -> DeliveryDestination
    {
        guard let channel = openChannels[number] else {
            // Its channel closed while it was in flight (librabbitmq queues the frames that arrive during a
            // channel.close round trip, and the reader sees them after the close-ok): the broker requeued it with
            // the channel's other unacknowledged deliveries. A reject now would be a method on a closed channel,
            // which the broker answers by closing the connection (504 CHANNEL_ERROR "expected 'channel.open'").
            return .returnedWithItsChannel
        }
        guard let consumer else {
            // In flight while its consumer was being cancelled: given back now rather than holding a prefetch slot
            // until the channel closes. The broker acknowledged it already if the consumer was a `no-ack` one:
            // rejecting that tag would close the channel, so it is dropped.
            if channel.automaticAcknowledgementTags.contains(tag) { return .droppedAsAcknowledgedByBroker }
            return .requeued
        }
        return .consumer(consumer, ChannelReference(number: number, id: channel.id))
    }
}

/// What becomes of a delivery that was read whole (`ChannelTable.destination(ofDeliveryOn:consumerTag:consumer:)`).
enum DeliveryDestination {
    /// Handed to its consumer, stamped with the channel incarnation that delivered it.
    case consumer(ConsumerSink, ChannelReference)
    /// Its `no-ack` consumer was cancelled: the broker counted it delivered, so there is nothing to give back.
    case droppedAsAcknowledgedByBroker
    /// Its consumer was cancelled while it was in flight, on a channel still open: rejected with requeue.
    case requeued
    /// Its channel closed while it was in flight: the broker requeued it already; nothing may be sent about it.
    case returnedWithItsChannel
}

/// Names one opened channel: its number (reused after it closes) and an id unique on the connection.
struct ChannelReference: Sendable, Hashable {
    var number: UInt16
    var id: Int
}

/// One open channel's state on the I/O thread (a closed channel leaves the table; why it ended is kept
/// in the table's retired channels).
final class ChannelState {
    let number: UInt16
    let id: Int
    /// Non-nil once `confirm.select` succeeded.
    var confirms: PublisherConfirms?
    /// Tags of the channel's `no-ack` consumers, kept after they are cancelled (a few strings per channel): a
    /// delivery in flight during the cancel must not be rejected.
    var automaticAcknowledgementTags: Set<String> = []

    init(number: UInt16, id: Int) {
        self.number = number
        self.id = id
    }

    var reference: ChannelReference { ChannelReference(number: number, id: id) }
}

/// A consumer's identity: tags are unique per channel, not per connection.
struct ConsumerKey: Hashable {
    var channel: UInt16
    var tag: String
}

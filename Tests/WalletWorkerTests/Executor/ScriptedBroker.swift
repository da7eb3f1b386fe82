import Synchronization
import TestSupport

@testable import AMQPTransport
@testable import WalletWorker

/// A test double at the executor's seam (`BrokerConnector`): the test hands deliveries in, answers each publish
/// (confirm, nack, return, time out), closes a connection with a code, raises `connection.blocked`, and reads back
/// what the worker did, in order (`log`). It is not a broker: it routes nothing and keeps no queues. What crosses
/// the wire is tested against RabbitMQ itself.
///
/// Every wait here is for an event (`waitFor`): a test never sleeps. The suites that use it have a time limit only
/// as a net for a test that would otherwise hang.
final class ScriptedBroker: BrokerConnector {
    /// What the worker did at the seam, in the order it did it.
    enum Event: Sendable, Equatable, CustomStringConvertible {
        case loginChecked
        case opened(session: Int, pipeline: Int)
        case published(session: Int, [AMQPOutboundMessage])
        case settled(session: Int, AMQPChannel.Settlement)
        case consumerCancelled(session: Int)
        case consumeChannelClosed(session: Int)
        case closed(session: Int)
        case replyConnectionOpened
        case replyCopy(AMQPOutboundMessage)
        case replyConnectionClosed
        /// A passive `queue.declare` counted the queue's consumers before a session consumed.
        case countedConsumers(Int)

        var description: String {
            switch self {
            case .loginChecked: "login checked"
            case .opened(let session, let pipeline): "session \(session) opened (pipeline \(pipeline))"
            case .published(let session, let messages):
                "session \(session) published \(messages.map { "\($0.exchange)/\($0.routingKey)" })"
            case .settled(let session, let settlement): "session \(session) \(settlement)"
            case .consumerCancelled(let session): "session \(session) cancelled its consumer"
            case .consumeChannelClosed(let session): "session \(session) closed its consume channel"
            case .closed(let session): "session \(session) closed"
            case .replyConnectionOpened: "reply connection opened"
            case .replyCopy(let copy): "reply copy to \(copy.routingKey)"
            case .replyConnectionClosed: "reply connection closed"
            case .countedConsumers(let count): "counted \(count) consumers"
            }
        }
    }

    /// How the broker answers a message the worker publishes.
    enum Answer: Sendable {
        case outcome(AMQPPublishOutcome)
        /// The publish fails with `error`, as the transport reports a channel the broker closed under it.
        case fail(AMQPError)
        /// Kept for the test to answer (`answerHeldPublish`).
        case hold
    }

    private struct State {
        var log: [Event] = []
        var sessions: [ScriptedSession] = []
        var loginFailures: [AMQPError] = []
        var openFailures: [any Error] = []
        var replyConnections: [ScriptedReplyConnection] = []
        var answer: @Sendable (AMQPOutboundMessage) -> Answer = { _ in .outcome(.confirmed) }
        var held: [ScriptedConfirmation] = []
        var frameMax = 131_072
        /// What a count of the queue's consumers answers (the other replicas', and a failed session's the broker
        /// still holds); a session that consumes is counted in its `consumersWhenStarted` on top of it.
        var consumers = 0
    }

    private let state = Mutex(State())
    /// Tests waiting for something to happen: woken as the log grows.
    private let watchers = ConditionWaiters<[Event]>()

    // MARK: - The script

    /// How every message published from now on is answered: confirmed by default.
    func answerPublishes(_ answer: @escaping @Sendable (AMQPOutboundMessage) -> Answer) {
        state.withLock { $0.answer = answer }
    }

    /// The next logins fail with these errors, in order.
    func failLogins(_ errors: [AMQPError]) {
        state.withLock { $0.loginFailures += errors }
    }

    /// The next sessions fail to open with these errors, in order.
    func failSessionOpens(_ errors: [any Error]) {
        state.withLock { $0.openFailures += errors }
    }

    /// Hands deliveries to session `number` (the newest open one when nil), as one batch; returns their tags.
    @discardableResult
    func deliver(_ messages: [ScriptedMessage], session number: Int? = nil) -> [UInt64] {
        session(number).deliver(messages)
    }

    /// Session `number` (1 is the first opened), or the newest.
    func session(_ number: Int? = nil) -> ScriptedSession {
        state.withLock { state in
            guard let number else { return state.sessions.last! }
            return state.sessions[number - 1]
        }
    }

    /// The newest reply connection.
    var replyConnection: ScriptedReplyConnection? { state.withLock { $0.replyConnections.last } }

    /// Answers the oldest publish held by `.hold`.
    func answerHeldPublish(_ result: Result<[AMQPPublishOutcome], AMQPError>) {
        let confirmation = state.withLock { $0.held.isEmpty ? nil : $0.held.removeFirst() }
        guard let confirmation else { preconditionFailure("no publish is held") }
        confirmation.settle(result)
    }

    // MARK: - Reading what happened

    var log: [Event] { state.withLock { $0.log } }

    /// Waits until the log satisfies `predicate`, or the test's task is cancelled (its time limit): the test's
    /// expectations after the wait then say what did not happen.
    func waitFor(_ predicate: @escaping @Sendable ([Event]) -> Bool) async {
        await watchers.wait(until: predicate) { log }
    }

    /// Waits until `count` events match `matching` in all.
    func waitFor(_ count: Int = 1, _ matching: @escaping @Sendable (Event) -> Bool) async {
        await waitFor { $0.filter(matching).count >= count }
    }

    /// Waits until `count` sessions were opened in all.
    func waitForSessions(_ count: Int) async {
        await waitFor(count) { if case .opened = $0 { true } else { false } }
    }

    /// Every message published on sessions, in order.
    var published: [AMQPOutboundMessage] {
        log.flatMap { event -> [AMQPOutboundMessage] in
            if case .published(_, let messages) = event { messages } else { [] }
        }
    }

    /// Every settlement, in order.
    var settlements: [AMQPChannel.Settlement] {
        log.compactMap { if case .settled(_, let settlement) = $0 { settlement } else { nil } }
    }

    func record(_ event: Event) {
        let log = state.withLock { state in
            state.log.append(event)
            return state.log
        }
        watchers.changed(log)
    }

    // MARK: - BrokerConnector

    func checkLogin() async throws(AMQPError) {
        let failure = state.withLock { $0.loginFailures.isEmpty ? nil : $0.loginFailures.removeFirst() }
        if let failure { throw failure }
        record(.loginChecked)
    }

    /// The queue's consumers as a count before a consume answers them (see `State.consumers`).
    func setConsumers(_ count: Int) {
        state.withLock { $0.consumers = count }
    }

    func openSession(
        pipeline: Int, queue: ConsumedQueue,
        beforeConsuming: @Sendable (_ countConsumers: @Sendable () async throws -> Int) async throws -> Bool
    ) async throws -> any BrokerSession {
        let failure = state.withLock { $0.openFailures.isEmpty ? nil : $0.openFailures.removeFirst() }
        if let failure { throw failure }
        let wanted = try await beforeConsuming { [self] in
            let count = state.withLock { $0.consumers }
            record(.countedConsumers(count))
            return count
        }
        guard wanted else { throw CancellationError() }
        let session = state.withLock { state in
            let session = ScriptedSession(
                broker: self, number: state.sessions.count + 1, pipeline: pipeline, frameMax: state.frameMax,
                consumersWhenStarted: state.consumers + 1)
            state.sessions.append(session)
            return session
        }
        record(.opened(session: session.number, pipeline: pipeline))
        return session
    }

    func openReplyConnection(pipeline: Int) async throws -> any ReplyConnection {
        let connection = ScriptedReplyConnection(broker: self)
        state.withLock { $0.replyConnections.append(connection) }
        record(.replyConnectionOpened)
        return connection
    }

    /// Answers a publish as the script says: at once, or held for the test. The publish is in the log (and a held
    /// one among those `answerHeldPublish` answers) before any answer is given.
    fileprivate func answer(_ messages: [AMQPOutboundMessage], _ confirmation: ScriptedConfirmation, session: Int) {
        let result = state.withLock { state -> Result<[AMQPPublishOutcome], AMQPError>? in
            var outcomes: [AMQPPublishOutcome] = []
            for message in messages {
                switch state.answer(message) {
                case .outcome(let outcome): outcomes.append(outcome)
                case .fail(let error): return .failure(error)
                case .hold:
                    state.held.append(confirmation)
                    return nil
                }
            }
            return .success(outcomes)
        }
        record(.published(session: session, messages))
        if let result { confirmation.settle(result) }
    }

    fileprivate func forget(_ confirmation: ScriptedConfirmation) {
        state.withLock { $0.held.removeAll { $0 === confirmation } }
    }
}

/// A delivery as the test writes it.
struct ScriptedMessage: Sendable {
    var body: [UInt8]
    var properties = AMQPMessageProperties()
    var exchange = "wallet.notifications"
    var routingKey = ""
    var redelivered = false
    var withheldBodySize: UInt64?

    init(json: String, messageID: String? = nil, headers: AMQPTable? = nil, replyTo: String? = nil) {
        body = Array(json.utf8)
        properties.messageID = messageID
        properties.headers = headers
        properties.replyTo = replyTo
    }

    init(body: [UInt8], messageID: String? = nil) {
        self.body = body
        properties.messageID = messageID
    }
}

/// One session the scripted broker opened.
final class ScriptedSession: BrokerSession {
    let number: Int
    let pipeline: Int
    let frameMax: Int
    let consumersWhenStarted: Int?
    private let broker: ScriptedBroker

    private struct Deliveries {
        var batches: [[AMQPDelivery]] = []
        /// nil while open; `.success` once the consumer was cancelled by us, `.failure` when the broker ended it.
        var end: Result<Void, AMQPError>?
        var waiter: CheckedContinuation<[AMQPDelivery]?, any Error>?
        var nextTag: UInt64 = 1
    }

    private let deliveries = Mutex(Deliveries())
    private let streams:
        [SessionConnection: (AsyncStream<AMQPConnectionEvent>, AsyncStream<AMQPConnectionEvent>.Continuation)]
    private let pending = Mutex<[ScriptedConfirmation]>([])
    private let isClosed = Mutex(false)

    fileprivate init(broker: ScriptedBroker, number: Int, pipeline: Int, frameMax: Int, consumersWhenStarted: Int) {
        self.broker = broker
        self.number = number
        self.pipeline = pipeline
        self.frameMax = frameMax
        self.consumersWhenStarted = consumersWhenStarted
        var streams:
            [SessionConnection: (AsyncStream<AMQPConnectionEvent>, AsyncStream<AMQPConnectionEvent>.Continuation)] = [:]
        for connection in SessionConnection.allCases {
            streams[connection] = AsyncStream<AMQPConnectionEvent>.makeStream()
        }
        self.streams = streams
    }

    // MARK: - The script

    fileprivate func deliver(_ messages: [ScriptedMessage]) -> [UInt64] {
        let (tags, waiter, batch) = deliveries.withLock {
            state -> ([UInt64], CheckedContinuation<[AMQPDelivery]?, any Error>?, [AMQPDelivery]) in
            precondition(state.end == nil, "session \(number) no longer consumes")
            let batch = messages.map { message in
                defer { state.nextTag += 1 }
                return AMQPDelivery(
                    body: message.body, properties: message.properties, withheldBodySize: message.withheldBodySize,
                    deliveryTag: state.nextTag, redelivered: message.redelivered, exchange: message.exchange,
                    routingKey: message.routingKey, consumerTag: "scripted.\(number)",
                    channel: ChannelReference(number: 1, id: number))
            }
            let tags = batch.map(\.deliveryTag)
            if let waiter = state.waiter {
                state.waiter = nil
                return (tags, waiter, batch)
            }
            state.batches.append(batch)
            return (tags, nil, [])
        }
        waiter?.resume(returning: batch)
        return tags
    }

    /// The broker raises `connection.blocked` (a resource alarm) or `unblocked` on one connection.
    func raise(_ event: AMQPConnectionEvent, on connection: SessionConnection) {
        streams[connection]!.1.yield(event)
    }

    /// The broker cancels the consumer (its queue was deleted, a quorum leader moved).
    func cancelConsumerByBroker() {
        end(.failure(AMQPError(code: .consumerCancelled, message: "scripted: the broker cancelled the consumer")))
    }

    /// The broker closes one connection with `replyCode`: its events say so, the consumer and every publish
    /// waiting for confirms fail with the same error, as the transport reports them.
    func closeByBroker(_ connection: SessionConnection, replyCode: UInt16 = 320, text: String = "CONNECTION_FORCED") {
        let error = AMQPError(
            code: .connectionClosedByBroker, message: "scripted: \(replyCode) \(text)", replyCode: replyCode,
            replyText: text)
        streams[connection]!.1.yield(.closed(error: error))
        streams[connection]!.1.finish()
        switch connection {
        case .consume: end(.failure(error))
        case .publish: failPending(error)
        }
    }

    // MARK: - BrokerSession

    /// Like the transport's: a cancelled reader gets nil (the consumer is abandoned).
    func nextDeliveries() async throws -> [AMQPDelivery]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let answer = deliveries.withLock { state -> Result<[AMQPDelivery]?, AMQPError>? in
                    if !state.batches.isEmpty { return .success(state.batches.removeFirst()) }
                    if Task.isCancelled { return .success(nil) }
                    switch state.end {
                    case .success?: return .success(nil)
                    case .failure(let error)?: return .failure(error)
                    case nil:
                        precondition(state.waiter == nil, "one reader at a time")
                        state.waiter = continuation
                        return nil
                    }
                }
                if let answer { continuation.resume(with: answer.mapError { $0 as any Error }) }
            }
        } onCancel: {
            let waiter = deliveries.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    func events(of connection: SessionConnection) -> AsyncStream<AMQPConnectionEvent> {
        streams[connection]!.0
    }

    func startPublishing(_ messages: [AMQPOutboundMessage], confirmTimeout: Duration) -> any PublishConfirmation {
        let confirmation = ScriptedConfirmation()
        if isClosed.withLock({ $0 }) {
            confirmation.settle(.failure(AMQPError(code: .closed, message: "scripted: the session is closed")))
            return confirmation
        }
        pending.withLock { $0.append(confirmation) }
        broker.answer(messages, confirmation, session: number)
        return confirmation
    }

    func startSettling(_ settlements: [AMQPChannel.Settlement]) {
        guard !isClosed.withLock({ $0 }) else { return }
        for settlement in settlements { broker.record(.settled(session: number, settlement)) }
    }

    func cancelConsumer() async {
        broker.record(.consumerCancelled(session: number))
        end(.success(()))
    }

    func closeConsumeChannel() async {
        broker.record(.consumeChannelClosed(session: number))
    }

    func close(timeout: Duration) async {
        let first = isClosed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        end(.failure(AMQPError(code: .closed, message: "scripted: closed by the worker")))
        failPending(AMQPError(code: .closed, message: "scripted: closed by the worker"))
        for (_, continuation) in streams.values { continuation.finish() }
        broker.record(.closed(session: number))
    }

    private func end(_ end: Result<Void, AMQPError>) {
        let waiter = deliveries.withLock { state -> CheckedContinuation<[AMQPDelivery]?, any Error>? in
            guard state.end == nil else { return nil }
            state.end = end
            defer { state.waiter = nil }
            return state.waiter
        }
        switch end {
        case .success: waiter?.resume(returning: nil)
        case .failure(let error): waiter?.resume(throwing: error)
        }
    }

    private func failPending(_ error: AMQPError) {
        let confirmations = pending.withLock { pending in
            defer { pending = [] }
            return pending
        }
        for confirmation in confirmations {
            confirmation.settle(.failure(error))
            broker.forget(confirmation)
        }
    }
}

/// The answer to one scripted publish: settled once, by the script or by a failure.
final class ScriptedConfirmation: PublishConfirmation {
    private enum State {
        case waiting([Int: CheckedContinuation<[AMQPPublishOutcome], any Error>])
        case settled(Result<[AMQPPublishOutcome], AMQPError>)
    }

    private let state = Mutex(State.waiting([:]))

    func settle(_ result: Result<[AMQPPublishOutcome], AMQPError>) {
        let waiters = state.withLock { state -> [CheckedContinuation<[AMQPPublishOutcome], any Error>] in
            guard case .waiting(let waiters) = state else { return [] }
            state = .settled(result)
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 as any Error }) }
    }

    /// Like the transport's: a cancelled wait throws `.closed` at once (the publishes stay unconfirmed).
    func outcomes() async throws(AMQPError) -> [AMQPPublishOutcome] {
        let id = ScriptedConfirmation.nextWaiter.add(1, ordering: .relaxed).newValue
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let settled = state.withLock { state -> Result<[AMQPPublishOutcome], AMQPError>? in
                        switch state {
                        case .settled(let result): return result
                        case .waiting(var waiters):
                            if Task.isCancelled { return .failure(Self.cancelled) }
                            waiters[id] = continuation
                            state = .waiting(waiters)
                            return nil
                        }
                    }
                    if let settled { continuation.resume(with: settled.mapError { $0 as any Error }) }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<[AMQPPublishOutcome], any Error>? in
                    guard case .waiting(var waiters) = state else { return nil }
                    let waiter = waiters.removeValue(forKey: id)
                    state = .waiting(waiters)
                    return waiter
                }
                waiter?.resume(throwing: Self.cancelled)
            }
        } catch {
            throw error as! AMQPError
        }
    }

    private static let cancelled = AMQPError(code: .closed, message: "scripted: cancelled while waiting for confirms")
    private static let nextWaiter = Atomic<Int>(0)
}

/// The scripted reply-to connection: records each copy; the broker can close it.
final class ScriptedReplyConnection: ReplyConnection {
    private let broker: ScriptedBroker
    let events: AsyncStream<AMQPConnectionEvent>
    private let continuation: AsyncStream<AMQPConnectionEvent>.Continuation
    private let closed = Mutex<AMQPError?>(nil)

    fileprivate init(broker: ScriptedBroker) {
        self.broker = broker
        (events, continuation) = AsyncStream<AMQPConnectionEvent>.makeStream()
    }

    /// The broker closes the connection (541 on an address it cannot resolve).
    func closeByBroker(replyCode: UInt16 = 541, text: String = "INTERNAL_ERROR") {
        let error = AMQPError(
            code: .connectionClosedByBroker, message: "scripted: \(replyCode) \(text)", replyCode: replyCode,
            replyText: text)
        closed.withLock { $0 = error }
        continuation.yield(.closed(error: error))
        continuation.finish()
    }

    func publish(_ copy: AMQPOutboundMessage) async throws(AMQPError) {
        if let error = closed.withLock({ $0 }) { throw error }
        broker.record(.replyCopy(copy))
    }

    func close(timeout: Duration) async {
        let first = closed.withLock { closed in
            defer { closed = closed ?? AMQPError(code: .closed, message: "scripted: closed by the worker") }
            return closed == nil
        }
        continuation.finish()
        if first { broker.record(.replyConnectionClosed) }
    }
}

import AMQPTransport
import Locking

// The one topology-per-test helper: uniquely named queues and exchanges that are deleted when the test ends.

/// A name no other test (or earlier run) uses: `wnw-it.<purpose>.<random>`.
public func uniqueName(_ purpose: String) -> String {
    "wnw-it.\(purpose).\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
}

/// One test's connection and first channel, and the queues and exchanges it owns.
/// `withBrokerSession` deletes them when the test ends, whether it passed or not.
public final class BrokerSession: Sendable {
    public let purpose: String
    public let url: String
    public let connection: AMQPConnection
    /// The session's first channel. A test that makes the broker close it opens another.
    public let channel: AMQPChannel
    private let owned = Locked<(queues: [String], exchanges: [String])>(([], []))

    init(purpose: String, url: String, connection: AMQPConnection, channel: AMQPChannel) {
        self.purpose = purpose
        self.url = url
        self.connection = connection
        self.channel = channel
    }

    /// Declares a uniquely named queue that is deleted at the end of the test.
    /// Non-durable by default: most tests do not need the disk.
    public func declareOwnedQueue(
        _ purpose: String, durable: Bool = false, arguments: AMQPTable = [:]
    ) async throws -> String {
        let name = uniqueName(purpose)
        own(queue: name)
        try await channel.declareQueue(name, durable: durable, arguments: arguments)
        return name
    }

    /// Declares a uniquely named exchange that is deleted at the end of the test.
    public func declareOwnedExchange(_ purpose: String, type: String = "direct") async throws -> String {
        let name = uniqueName(purpose)
        own(exchange: name)
        try await channel.declareExchange(name, type: type, durable: false)
        return name
    }

    /// Registers queues declared some other way (another channel, the worker, a test of declare itself) for deletion.
    public func own(queue names: String...) { own(queues: names) }
    public func own(queues names: [String]) { owned.withLock { $0.queues += names } }
    public func own(exchange names: String...) { own(exchanges: names) }
    public func own(exchanges names: [String]) { owned.withLock { $0.exchanges += names } }

    var ownedNames: (queues: [String], exchanges: [String]) { owned.withLock { $0 } }
}

/// Deletes queues and exchanges (a missing one is fine) on a connection of its own. A broker that is no longer there
/// (a private node the test stopped) took them with it: nothing to do then.
public func deleteTopology(
    queues: [String], exchanges: [String], url: String = TestBroker.urlText, purpose: String
) async throws {
    guard !queues.isEmpty || !exchanges.isEmpty else { return }
    guard let connection = try? await TestBroker.connect(purpose: "\(purpose) (clean-up)", url: url) else { return }
    do {
        let channel = try await connection.openChannel()
        for name in Set(queues) { _ = try await channel.deleteQueue(name) }
        for name in Set(exchanges) { try await channel.deleteExchange(name) }
        try? await channel.close()
    } catch {
        await connection.close(timeout: .seconds(5))
        throw error
    }
    await connection.close(timeout: .seconds(5))
}

/// Runs `body` with a connected session (to `url`, the test broker by default); afterwards closes the connection and
/// deletes the session's queues and exchanges, also when `body` throws. A clean-up that fails fails the test
/// (unless `body` failed first: its error is the one thrown).
public func withBrokerSession<T>(
    _ purpose: String,
    url: String = TestBroker.urlText,
    configure: (inout AMQPConnectionConfiguration) -> Void = { _ in },
    _ body: (BrokerSession) async throws -> T
) async throws -> T {
    let connection = try await TestBroker.connect(purpose: purpose, url: url, configure: configure)
    let session: BrokerSession
    do {
        session = BrokerSession(
            purpose: purpose, url: url, connection: connection, channel: try await connection.openChannel())
    } catch {
        await connection.close()
        throw error
    }
    let result: Result<T, any Error>
    do {
        result = .success(try await body(session))
    } catch {
        result = .failure(error)
    }
    // Closed first: its exclusive queues go with it, and a connection the broker blocked cannot hold up the clean-up.
    await connection.close(timeout: .seconds(5))
    let cleanUp: Result<Void, any Error>
    do {
        let (queues, exchanges) = session.ownedNames
        try await deleteTopology(queues: queues, exchanges: exchanges, url: url, purpose: purpose)
        cleanUp = .success(())
    } catch {
        cleanUp = .failure(BrokerTestError("could not delete the test's queues and exchanges: \(error)"))
    }
    let value = try result.get()
    try cleanUp.get()
    return value
}

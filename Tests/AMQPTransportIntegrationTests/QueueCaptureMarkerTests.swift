import AMQPTransport
import BrokerTestSupport
import TestSupport
import Testing

/// The integration tests' "nothing more came" check (`QueueCapture.recordsBeforeAMarker`): a marker published
/// behind what a queue holds, waited for, ends the check at an event instead of a window of guessed length.
@Suite("A capture's marker", .timeLimit(.minutes(1)))
struct QueueCaptureMarkerTests {
    @Test("returns exactly what the queue held when it was called, in order, without the markers")
    func returnsWhatTheQueueHeld() async throws {
        try await withBrokerSession("capture marker") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("capture-marker")
            try await channel.enableConfirms()
            let first = (0..<200).map { "first-\($0)" }
            try await publishConfirmed(first.map { message(to: queue, $0) }, on: channel)

            // Asked at once: most of the 200 have not arrived yet, and the marker waits for them all.
            let capture = try await MessageCapture.start(queue: queue, on: session.connection)
            let held = try await capture.messagesBeforeAMarker()
            #expect(held.map(\.text) == first)

            // Again after more arrived: the first marker is left out of what is returned; `messages` keeps both.
            let second = ["second-0", "second-1"]
            try await publishConfirmed(second.map { message(to: queue, $0) }, on: channel)
            let all = try await capture.messagesBeforeAMarker()
            #expect(all.map(\.text) == first + second)
            let recorded = capture.messages
            #expect(recorded.count == first.count + second.count + 2)
            #expect(recorded.last?.messageID?.hasPrefix("capture-marker.") == true)
            await capture.stop()
        }
    }
}

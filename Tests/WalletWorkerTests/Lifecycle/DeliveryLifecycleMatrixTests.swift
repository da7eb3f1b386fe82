import AMQPTransport
import Testing
import WalletStore

@testable import WalletWorker

/// Every input in every state: each state of a batch and of a session is set up, then every kind of input arrives
/// in it, fresh where the state waits for it (its expected actions are the rows of `DeliveryLifecycleTests`) and
/// stale everywhere (an answer to a store call, publish, check or timer that is not pending, or an input for a
/// session that has ended): a stale input changes nothing, neither at once nor in what the state does next.
@Suite("Delivery lifecycle: every input in every state") struct DeliveryLifecycleMatrixTests {
    typealias H = LifecycleHarness

    /// A state, and how the test drives it to its end after the inputs (so that "changes nothing" is checked on
    /// what follows too).
    struct State: Sendable, CustomTestStringConvertible {
        var name: String
        var setUp: @Sendable () -> H
        var testDescription: String { name }
    }

    static let states: [State] = [
        State(name: "a batch waiting behind a store call") {
            var h = H.consuming()
            h.receive([1])
            h.receive([2])
            return h
        },
        State(name: "storing") {
            var h = H.consuming()
            h.receive([1, 2])
            return h
        },
        State(name: "storing one message at a time") {
            var h = H.consuming()
            h.receive([1, 2])
            h.storeFails(H.refused)
            return h
        },
        State(name: "checking the store") {
            var h = H.consuming()
            h.receive([1, 2])
            h.storeFails(H.ownFailure)
            return h
        },
        State(name: "waiting to retry") {
            var h = H.consuming()
            h.receive([1, 2])
            h.storeFails(H.ownFailure)
            h.checked(passes: true)
            return h
        },
        State(name: "held for the store") {
            var h = H.consuming()
            h.receive([1, 2])
            h.storeFails(H.outage)
            return h
        },
        State(name: "publishing") {
            var h = H.consuming()
            h.receive([1, 2])
            h.stored()
            return h
        },
        State(name: "republishing") {
            var h = H.consuming()
            h.receive([1, 2])
            h.stored()
            h.confirmed(.nacked)
            return h
        },
        State(name: "requeueing") {
            var h = H.consuming()
            h.receive([1, 2])
            h.stored()
            h.confirmed(.nacked)
            h.confirmed(.nacked)
            return h
        },
        State(name: "giving back") {
            var h = H.consuming()
            h.receive([1])
            h.stored()
            h.receive([2])
            h.storeFails(H.outage)
            h.fire("give back", advance: .seconds(60))
            return h
        },
        State(name: "stopping, draining") {
            var h = H.consuming()
            h.receive([1, 2])
            h.stop()
            return h
        },
        State(name: "a shard handing over") {
            var h = H.consuming(shard: true)
            h.receive([1])
            h.receive([2])
            h.stop()
            return h
        },
        State(name: "a session failed, not yet closed") {
            var h = H.consuming()
            h.receive([1, 2])
            h.sessionFailed()
            return h
        },
        State(name: "reconnecting") {
            var h = H.consuming()
            h.sessionFailed()
            h.closed()
            return h
        },
        State(name: "paused for the store") {
            var h = H.consuming()
            h.receive([1])
            h.storeFails(H.outage)
            h.fire("give back", advance: .seconds(60))
            h.closed()
            return h
        },
    ]

    /// Inputs that answer nothing pending, or belong to a session that is over.
    static func staleInputs(_ h: H) -> [(String, (inout DeliveryLifecycle) -> [LifecycleAction])] {
        let now = h.now
        let ended = DeliveryLifecycle.SessionID(pipeline: 0, number: 999)
        let current = h.session ?? ended
        let delivery = DeliveryLifecycle.Delivery(
            tag: 77, original: H.original(id: "stale"), redelivered: false, receivedAt: now)
        return [
            (
                "a store answer for no pending batch",
                {
                    $0.storeAnswered(
                        current, DeliveryLifecycle.BatchID(value: 99_999), .stored([H.processed(1)]), now: now)
                }
            ),
            (
                "a store answer of an ended session",
                {
                    $0.storeAnswered(ended, DeliveryLifecycle.BatchID(value: 1), .stored([H.processed(1)]), now: now)
                }
            ),
            (
                "a check nobody asked for",
                { $0.storeChecked(DeliveryLifecycle.CheckID(value: 99_999), failure: nil, now: now) }
            ),
            (
                "confirms of no pending publish",
                {
                    $0.confirmsArrived(
                        current, DeliveryLifecycle.PublishID(value: 99_999), .outcomes([.confirmed]), now: now)
                }
            ),
            ("a timer that was never started", { $0.timerFired(DeliveryLifecycle.TimerID(value: 99_999), now: now) }),
            ("deliveries of an ended session", { $0.batchReceived(ended, [delivery], now: now) }),
            ("the consumer of an ended session ending", { $0.consumerEnded(ended, now: now) }),
            (
                "an ended session failing",
                {
                    $0.sessionFailed(ended, error: AMQPError(code: .connectionLost, message: "late"), now: now)
                }
            ),
            ("an ended session closing", { $0.sessionClosed(ended, now: now) }),
            ("a session starting that was never connected", { $0.sessionStarted(ended, frameMax: 131_072, now: now) }),
        ]
    }

    @Test(arguments: states)
    func staleInputsChangeNothing(state: State) {
        var touched = state.setUp()
        let untouched = state.setUp()
        for (name, input) in Self.staleInputs(touched) {
            let actions = input(&touched.machine)
            #expect(actions.isEmpty, "\(name): \(actions.compactMap(touched.summary))")
        }
        // What the state does next is the same with or without them.
        var left = touched
        var right = untouched
        #expect(Self.finish(&left) == Self.finish(&right))
    }

    /// Every fresh input the state waits for, one after another, then a stop and everything answered: the lines,
    /// and the check that every delivery received has exactly one end.
    @Test(arguments: states)
    func everyDeliveryEndsOnceWhateverComesNext(state: State) {
        var h = state.setUp()
        let lines = Self.finish(&h)
        var ends: [UInt64: Int] = [:]
        for line in h.log {
            let words = line.split(separator: " ")
            guard words.count == 2, let tag = UInt64(words[0]) else { continue }
            ends[tag, default: 0] += 1
        }
        for tag in h.deliveries.keys.sorted() {
            #expect(
                ends[tag] == 1,
                "\(state.name): delivery \(tag) ended \(ends[tag] ?? 0) times\n\(h.log.joined(separator: "\n"))")
        }
        #expect(!lines.isEmpty || h.stores.isEmpty, "\(state.name) did not move")
        #expect(h.stores.isEmpty && h.publishes.isEmpty && h.checks.isEmpty && h.connects.isEmpty)
    }

    /// Answers everything pending the ordinary way (stores store, publishes are confirmed, checks pass, timers fire,
    /// sessions close), stops, and goes on until nothing is pending; returns the lines.
    static func finish(_ h: inout H) -> [String] {
        var lines: [String] = []
        var stopped = false
        for _ in 0..<200 {
            if !h.stores.isEmpty {
                lines +=
                    h.stores[0].oneAtATime
                    ? h.storeAnswers { tags in .stored(tags.map(H.processed)) } : h.stored()
            } else if !h.publishes.isEmpty {
                lines += h.confirmed()
            } else if !h.checks.isEmpty {
                lines += h.checked(passes: true)
            } else if !h.endedSessions.isEmpty {
                lines += h.closed()
            } else if !h.connects.isEmpty {
                lines += h.started()
            } else if let timer = h.timers.first(where: { $0.purpose != "give back" }) {
                lines += h.fire(timer.purpose)
            } else if !stopped {
                stopped = true
                lines += h.stop()
                if h.session != nil, h.machine.isStoreOut == false { lines += h.consumerEnded() }
            } else if h.session != nil, !h.endedSessions.contains(h.session!) {
                lines += h.consumerEnded()
                if h.endedSessions.isEmpty { break }
            } else {
                break
            }
        }
        return lines
    }
}

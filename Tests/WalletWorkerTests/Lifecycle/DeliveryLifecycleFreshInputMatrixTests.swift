import AMQPTransport
import Testing
import WalletStore

@testable import WalletWorker

/// Every fresh input in every state: each state of `DeliveryLifecycleMatrixTests.states` is set up, then each input
/// that means something in it arrives (a stop, the session failing, the consumer ending, and every answer the state
/// waits for, in each of its kinds); a row says what the machine does at once, which store calls follow, and how
/// each delivery ends once the state is driven to its end (`DeliveryLifecycleMatrixTests.finish`: everything pending
/// answered the ordinary way, then a stop). Every row is also checked against the lifecycle's promises
/// (`LifecycleInvariants`, as the random-input test checks them): no delivery acknowledged before what it published
/// is confirmed, none settled twice, none without exactly one end, no committed delivery stored again; and after the
/// session failed, nothing is settled on it.
@Suite("Delivery lifecycle: every fresh input in every state") struct DeliveryLifecycleFreshInputMatrixTests {
    typealias H = LifecycleHarness

    /// An input, given through the harness; returns the lines of the actions the machine returned.
    struct Input: Sendable {
        var name: String
        var apply: @Sendable (inout H) -> [String]

        init(_ name: String, _ apply: @escaping @Sendable (inout H) -> [String]) {
            self.name = name
            self.apply = apply
        }

        static let stop = Input("stop requested") { $0.stop() }
        static let sessionFailed = Input("session failed") { $0.sessionFailed() }
        /// The pipeline's next session fails to connect (no session is consuming).
        static let connectFailed = Input("session failed while connecting") { h in
            let id = h.connects.removeFirst()
            return h.apply(
                h.machine.sessionFailed(id, error: AMQPError(code: .connectionFailed, message: "refused"), now: h.now))
        }
        /// The pipeline has no session: the last one, closed, fails late.
        static let closedSessionFailed = Input("session failed after its close") { h in
            let id = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)
            return h.apply(
                h.machine.sessionFailed(id, error: AMQPError(code: .connectionLost, message: "late"), now: h.now))
        }
        static let sessionStarted = Input("session started") { $0.started() }
        static let closed = Input("session closed") { $0.closed() }
        static let consumerEnded = Input("consumer ended") { $0.consumerEnded() }

        // The store's answers to the oldest store call.
        static let stored = Input("stored") { $0.stored() }
        static let ownFailure = Input("store failed: transient, its own") { $0.storeFails(H.ownFailure) }
        static let outage = Input("store failed: outage") { $0.storeFails(H.outage) }
        static let refused = Input("store failed: refused input") { $0.storeFails(H.refused) }
        static let fatal = Input("store failed: fatal") { $0.storeFails(H.permanent) }
        static let oneByOneStored = Input("one by one: all stored") { h in
            h.storeAnswers { tags in .stored(tags.map(H.processed)) }
        }
        static let oneByOneRefusesOne = Input("one by one: 1 stored, 2 refused") { h in
            h.storeAnswers { tags in
                StoreAnswer(outcomes: [.stored(H.processed(tags[0])), .refused(reason: "NUL in text")], failure: nil)
            }
        }
        static let oneByOneThenOwnFailure = oneByOne("then transient, its own", H.ownFailure)
        static let oneByOneThenOutage = oneByOne("then outage", H.outage)
        static let oneByOneThenRefused = oneByOne("then refused input", H.refused)
        static let oneByOneThenFatal = oneByOne("then fatal", H.permanent)

        /// Stored one message at a time: the first committed, then the store fails with `error`.
        static func oneByOne(_ name: String, _ error: StoreError) -> Input {
            Input("one by one: 1 committed, \(name)") { h in
                h.storeAnswers { tags in StoreAnswer(outcomes: [.stored(H.processed(tags[0]))], failure: error) }
            }
        }

        // Checks, confirms and timers.
        static let checkPasses = Input("check passes") { $0.checked(passes: true) }
        static let checkFails = Input("check fails") { $0.checked(passes: false) }
        static let confirmed = Input("confirmed") { $0.confirmed() }
        static let nacked = Input("nacked") { $0.confirmed(.nacked) }
        static let returned = Input("returned") { $0.confirmed(.returned(replyCode: 312, replyText: "NO_ROUTE")) }
        static let unencodable = Input("unencodable") { $0.confirmed(.unencodable(reason: "too big")) }
        static let timedOut = Input("confirms timed out") { $0.confirmsTimedOut() }
        static let retryTimer = Input("retry timer fires") { $0.fire("retry store") }
        static let requeueTimer = Input("requeue timer fires") { $0.fire("requeue") }
        static let probeTimer = Input("probe timer fires") { $0.fire("probe") }
        static let giveBackEarly = Input("give-back timer fires, held 0 s") { $0.fire("give back") }
        static let giveBackDue = Input("give-back timer fires, held 60 s") {
            $0.fire("give back", advance: .seconds(60))
        }
    }

    /// A state, an input, and what follows.
    struct Row: Sendable, CustomTestStringConvertible {
        var state: String
        var input: Input
        /// The lines of the actions the input returns.
        var actions: [String]
        /// The store calls after those, until the end.
        var later: [String]
        /// How each delivery ends, by tag.
        var ends: String

        init(_ state: String, _ input: Input, _ actions: [String], later: [String], ends: String) {
            self.state = state
            self.input = input
            self.actions = actions
            self.later = later
            self.ends = ends
        }

        var testDescription: String { "\(state): \(input.name)" }
    }

    static let rows: [Row] = [
        // Batch 1 at the store, batch 2 waiting behind it: the store's answer is pending.
        // A work queue finishes everything it received: batch 2 is still stored.
        Row(
            "a batch waiting behind a store call", .stop, ["cancel consumer"], later: ["store 2"],
            ends: "1 processed, 2 processed"),
        Row(
            "a batch waiting behind a store call", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row(
            "a batch waiting behind a store call", .consumerEnded, [], later: ["store 2"],
            ends: "1 processed, 2 processed"),
        Row(
            "a batch waiting behind a store call", .stored, ["publish 1×1", "store 2"], later: [],
            ends: "1 processed, 2 processed"),
        Row(
            "a batch waiting behind a store call", .ownFailure, ["check store"], later: ["store 1", "store 2"],
            ends: "1 processed, 2 processed"),
        Row(
            "a batch waiting behind a store call", .outage, ["outage began", "timer probe", "timer give back"],
            later: ["store 1", "store 2"], ends: "1 processed, 2 processed"),
        Row(
            "a batch waiting behind a store call", .refused, ["publish 1×1", "store 2"], later: [],
            ends: "1 store_refused, 2 processed"),
        // Nothing more is stored: both go back with the channel's close.
        Row(
            "a batch waiting behind a store call", .fatal,
            ["fail worker", "1 requeued", "2 requeued", "cancel consumer", "end session stopped"], later: [],
            ends: "1 requeued, 2 requeued"),
        // Batch 1,2 at the store.
        Row("storing", .stop, ["cancel consumer"], later: [], ends: "1 processed, 2 processed"),
        Row(
            "storing", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("storing", .consumerEnded, [], later: [], ends: "1 processed, 2 processed"),
        Row("storing", .stored, ["publish 1×1,2×1"], later: [], ends: "1 processed, 2 processed"),
        Row("storing", .ownFailure, ["check store"], later: ["store 1,2"], ends: "1 processed, 2 processed"),
        Row(
            "storing", .outage, ["outage began", "timer probe", "timer give back"], later: ["store 1,2"],
            ends: "1 processed, 2 processed"),
        // Refused as a whole: each message alone, to find the one at fault.
        Row(
            "storing", .refused, ["one at a time", "store one by one 1,2"], later: [],
            ends: "1 processed, 2 processed"),
        Row(
            "storing", .fatal, ["fail worker", "1 requeued", "2 requeued", "cancel consumer", "end session stopped"],
            later: [], ends: "1 requeued, 2 requeued"),
        // Batch 1,2 refused as a whole, at the store one message at a time.
        Row("storing one message at a time", .stop, ["cancel consumer"], later: [], ends: "1 processed, 2 processed"),
        Row(
            "storing one message at a time", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("storing one message at a time", .consumerEnded, [], later: [], ends: "1 processed, 2 processed"),
        Row(
            "storing one message at a time", .oneByOneStored, ["publish 1×1,2×1"], later: [],
            ends: "1 processed, 2 processed"),
        Row(
            "storing one message at a time", .oneByOneRefusesOne, ["publish 1×1,2×1"], later: [],
            ends: "1 processed, 2 store_refused"),
        // The committed message leaves; only the rest is checked and stored again.
        Row(
            "storing one message at a time", .oneByOneThenOwnFailure, ["publish 1×1", "check store"],
            later: ["store 2"], ends: "1 processed, 2 processed"),
        Row(
            "storing one message at a time", .oneByOneThenOutage,
            ["publish 1×1", "outage began", "timer probe", "timer give back"], later: ["store 2"],
            ends: "1 processed, 2 processed"),
        Row(
            "storing one message at a time", .oneByOneThenRefused, ["publish 1×1", "publish 2×1"], later: [],
            ends: "1 processed, 2 store_refused"),
        Row(
            "storing one message at a time", .oneByOneThenFatal,
            ["publish 1×1", "fail worker", "2 requeued", "cancel consumer"], later: [],
            ends: "1 processed, 2 requeued"),
        // Batch 1,2 failed (transient): the store's check is pending.
        // Waiting for the store: given back at once, and no store call follows.
        Row(
            "checking the store", .stop, ["1 requeued", "2 requeued", "cancel consumer", "end session stopped"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "checking the store", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("checking the store", .consumerEnded, [], later: ["store 1,2"], ends: "1 processed, 2 processed"),
        Row(
            "checking the store", .checkPasses, ["timer retry store"], later: ["store 1,2"],
            ends: "1 processed, 2 processed"),
        Row(
            "checking the store", .checkFails, ["outage began", "timer probe", "timer give back"], later: ["store 1,2"],
            ends: "1 processed, 2 processed"),
        // Batch 1,2 failed, the store passed its check: the retry timer is pending.
        // Waiting for the store: given back at once, and no store call follows.
        Row(
            "waiting to retry", .stop, ["1 requeued", "2 requeued", "cancel consumer", "end session stopped"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "waiting to retry", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("waiting to retry", .consumerEnded, [], later: ["store 1,2"], ends: "1 processed, 2 processed"),
        Row("waiting to retry", .retryTimer, ["store 1,2"], later: [], ends: "1 processed, 2 processed"),
        // Batch 1,2 held, the store out: the probe and give-back timers are pending.
        // Waiting for the store: given back at once, and no store call follows.
        Row(
            "held for the store", .stop, ["1 requeued", "2 requeued", "cancel consumer", "end session stopped"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "held for the store", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("held for the store", .consumerEnded, [], later: ["store 1,2"], ends: "1 processed, 2 processed"),
        Row("held for the store", .probeTimer, ["check store"], later: ["store 1,2"], ends: "1 processed, 2 processed"),
        // Held for less than `giveBackAfter`: armed again.
        Row(
            "held for the store", .giveBackEarly, ["timer give back"], later: ["store 1,2"],
            ends: "1 processed, 2 processed"),
        Row(
            "held for the store", .giveBackDue,
            ["giving back 2", "1 requeued", "2 requeued", "end session paused for the store"], later: [],
            ends: "1 requeued, 2 requeued"),
        // Batch 1,2 stored: its results' confirms are pending.
        Row("publishing", .stop, ["cancel consumer"], later: [], ends: "1 processed, 2 processed"),
        Row(
            "publishing", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("publishing", .consumerEnded, [], later: [], ends: "1 processed, 2 processed"),
        Row(
            "publishing", .confirmed, ["settle ack ≤2", "1 processed", "2 processed"], later: [],
            ends: "1 processed, 2 processed"),
        Row("publishing", .nacked, ["publish 1×1,2×1"], later: [], ends: "1 retried, 2 retried"),
        Row("publishing", .returned, ["publish 1×1,2×1"], later: [], ends: "1 retried, 2 retried"),
        Row("publishing", .unencodable, ["publish 1×1,2×1"], later: [], ends: "1 unpublishable, 2 unpublishable"),
        // A confirm timeout is every message's failure (`ResultsKillSwitch`): the worker pauses for the results.
        Row(
            "publishing", .timedOut,
            [
                "paused for the results", "timer results trial", "1 requeued", "2 requeued",
                "end session paused for the results",
            ], later: [], ends: "1 requeued, 2 requeued"),
        // Batch 1,2's results nacked: its retry copies' confirms are pending.
        Row("republishing", .stop, ["cancel consumer"], later: [], ends: "1 retried, 2 retried"),
        Row(
            "republishing", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("republishing", .consumerEnded, [], later: [], ends: "1 retried, 2 retried"),
        Row(
            "republishing", .confirmed, ["settle ack ≤2", "1 retried", "2 retried"], later: [],
            ends: "1 retried, 2 retried"),
        Row(
            "republishing", .nacked, ["requeue delayed 2", "timer requeue"], later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "republishing", .timedOut, ["requeue delayed 2", "timer requeue"], later: [], ends: "1 requeued, 2 requeued"
        ),
        // Batch 1,2's retry copies nacked too: the requeue timer is pending.
        // Stopping ends the requeue delay: requeued at once.
        Row(
            "requeueing", .stop, ["cancel consumer", "settle requeue 1, requeue 2", "1 requeued", "2 requeued"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "requeueing", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("requeueing", .consumerEnded, [], later: [], ends: "1 requeued, 2 requeued"),
        Row(
            "requeueing", .requeueTimer, ["settle requeue 1, requeue 2", "1 requeued", "2 requeued"], later: [],
            ends: "1 requeued, 2 requeued"),
        // Held 60 s: batch 2 given back, batch 1 (committed) publishing; the probe timer is pending.
        Row("giving back", .stop, ["cancel consumer"], later: [], ends: "1 processed, 2 requeued"),
        Row(
            "giving back", .sessionFailed, ["session failed", "1 dropped_with_session", "end session failed"],
            later: [], ends: "1 dropped_with_session, 2 requeued"),
        Row("giving back", .consumerEnded, [], later: [], ends: "1 processed, 2 requeued"),
        Row(
            "giving back", .confirmed, ["settle ack 1", "1 processed", "end session paused for the store"], later: [],
            ends: "1 processed, 2 requeued"),
        Row("giving back", .nacked, ["publish 1×1"], later: [], ends: "1 retried, 2 requeued"),
        Row(
            "giving back", .timedOut,
            ["paused for the results", "timer results trial", "1 requeued", "end session paused for the store"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row("giving back", .probeTimer, ["check store"], later: [], ends: "1 processed, 2 requeued"),
        // A stop while batch 1,2 is at the store: the consumer's end and the store's answer are pending.
        Row("stopping, draining", .stop, [], later: [], ends: "1 processed, 2 processed"),
        Row(
            "stopping, draining", .sessionFailed,
            ["session failed", "1 dropped_with_session", "2 dropped_with_session", "end session failed"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row("stopping, draining", .consumerEnded, [], later: [], ends: "1 processed, 2 processed"),
        Row("stopping, draining", .stored, ["publish 1×1,2×1"], later: [], ends: "1 processed, 2 processed"),
        // Stopping: what fails is given back, not tried again.
        Row(
            "stopping, draining", .ownFailure, ["1 requeued", "2 requeued", "end session stopped"], later: [],
            ends: "1 requeued, 2 requeued"),
        // The outage is the process's, stopping or not; the probe then fires into nothing (see the last test).
        Row(
            "stopping, draining", .outage,
            ["1 requeued", "2 requeued", "end session stopped", "outage began", "timer probe"], later: [],
            ends: "1 requeued, 2 requeued"),
        Row(
            "stopping, draining", .refused, ["one at a time", "store one by one 1,2"], later: [],
            ends: "1 processed, 2 processed"),
        Row(
            "stopping, draining", .fatal, ["fail worker", "1 requeued", "2 requeued", "end session stopped"], later: [],
            ends: "1 requeued, 2 requeued"),
        // A shard stopped with batch 1 at the store (batch 2 handed over): the store's answer is pending.
        Row("a shard handing over", .stop, [], later: [], ends: "1 processed, 2 requeued"),
        Row(
            "a shard handing over", .sessionFailed, ["session failed", "1 dropped_with_session", "end session failed"],
            later: [], ends: "1 dropped_with_session, 2 requeued"),
        Row("a shard handing over", .consumerEnded, [], later: [], ends: "1 processed, 2 requeued"),
        Row("a shard handing over", .stored, ["publish 1×1"], later: [], ends: "1 processed, 2 requeued"),
        Row(
            "a shard handing over", .ownFailure, ["1 requeued", "end session stopped"], later: [],
            ends: "1 requeued, 2 requeued"),
        // As while draining: the outage begins, its probe is ignored once stopping.
        Row(
            "a shard handing over", .outage, ["1 requeued", "end session stopped", "outage began", "timer probe"],
            later: [], ends: "1 requeued, 2 requeued"),
        Row("a shard handing over", .refused, ["publish 1×1"], later: [], ends: "1 store_refused, 2 requeued"),
        Row(
            "a shard handing over", .fatal, ["fail worker", "1 requeued", "end session stopped"], later: [],
            ends: "1 requeued, 2 requeued"),
        // Session 0.1 failed with batch 1,2 at the store: its close (and that store answer) pending.
        Row(
            "a session failed, not yet closed", .stop, [], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row(
            "a session failed, not yet closed", .sessionFailed, [], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        Row(
            "a session failed, not yet closed", .closed, ["reconnecting 1", "connect 0.2"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        // Committed, never published: the broker redelivers both, and the store replays them.
        Row(
            "a session failed, not yet closed", .stored, [], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        // Found by this table: the store said it was out and nothing noted it (the session failed but was not
        // closed, so the batch was gone and the answer ignored), while the same answer after the close began the
        // outage. What the store says about itself holds for the whole process, whichever session asked.
        Row(
            "a session failed, not yet closed", .outage, ["outage began", "timer probe"], later: [],
            ends: "1 dropped_with_session, 2 dropped_with_session"),
        // Session 0.1 closed: session 0.2 connecting.
        Row("reconnecting", .stop, [], later: [], ends: ""),
        Row("reconnecting", .connectFailed, ["end session failed"], later: [], ends: ""),
        Row("reconnecting", .sessionStarted, [], later: [], ends: ""),
        // Given back and closed: the pipeline waits for the store, the probe timer pending.
        Row("paused for the store", .stop, ["stop pipeline 0"], later: [], ends: "1 requeued"),
        Row("paused for the store", .closedSessionFailed, [], later: [], ends: "1 requeued"),
        Row("paused for the store", .probeTimer, ["check store"], later: [], ends: "1 requeued"),
    ]

    @Test(arguments: rows)
    func freshInput(row: Row) throws {
        let state = try #require(DeliveryLifecycleMatrixTests.states.first { $0.name == row.state })
        var h = state.setUp()
        let actions = row.input.apply(&h)
        let after = DeliveryLifecycleMatrixTests.finish(&h)
        let later = after.filter { $0.hasPrefix("store ") }
        // Every end, those of the state's setting up too: lines "<tag> <fate>".
        var ends: [(tag: UInt64, fate: Substring)] = []
        for line in h.log {
            let words = line.split(separator: " ")
            guard words.count == 2, let tag = UInt64(words[0]) else { continue }
            ends.append((tag, words[1]))
        }
        let endsText = ends.sorted { $0.tag < $1.tag }.map { "\($0.tag) \($0.fate)" }.joined(separator: ", ")
        let observed = "\(actions) later: \(later) ends: \"\(endsText)\""
        #expect(actions == row.actions, "observed \(observed)")
        #expect(later == row.later, "observed \(observed)")
        #expect(endsText == row.ends, "observed \(observed)")

        h.invariants.checkEnds()
        #expect(h.invariants.violations.isEmpty, "\(h.invariants.violations)\n\(h.log.joined(separator: "\n"))")
        #expect(h.stores.isEmpty && h.publishes.isEmpty && h.checks.isEmpty && h.connects.isEmpty, "not finished")
        if row.input.name == Input.sessionFailed.name {
            #expect(!(actions + after).contains { $0.hasPrefix("settle") }, "settled on a failed session")
        }
    }

    /// Two work-queue pipelines, stopping: one's store call finds the store out while the other has a batch waiting.
    /// Found by this table: an outage that began after the stop held the other pipeline's waiting batch until the
    /// give-back timer (`giveBackAfter`, 15 minutes by default), past any shutdown grace period: the stop had given
    /// back only what was waiting for the store when it came, and probes are ignored once stopping. Now the outage
    /// gives back at once what the stop would have given back had the store been out then.
    @Test func anOutageAfterTheStopGivesBackTheOtherPipelinesWaitingBatchAtOnce() {
        var h = H(queues: [
            ConsumedQueue(name: "a", retryQueue: "a.retry", isShard: false),
            ConsumedQueue(name: "b", retryQueue: "b.retry", isShard: false),
        ])
        h.start()
        h.started()
        h.receive([1])
        h.started()
        h.receive([1])
        h.receive([2])
        #expect(h.stop() == ["cancel consumer", "cancel consumer"])
        #expect(
            h.storeFails(H.outage) == [
                "1 requeued", "end session stopped", "outage began", "timer probe", "2 requeued",
            ],
            "pipeline a gives its batch back, and pipeline b its batch 2, which waited for the store")
        #expect(h.stored() == ["publish 1×1"], "pipeline b's batch 1 was at the store: it finishes")
        #expect(h.confirmed() == ["settle ack 1", "1 processed", "end session stopped"])
        #expect(h.fire("give back", advance: .seconds(55)) == ["no give back timer"])
        #expect(h.closed() == ["stop pipeline 0"])
        #expect(h.closed() == ["stop pipeline 1"])
        h.invariants.checkEnds()
        #expect(h.invariants.violations.isEmpty, "\(h.invariants.violations)")
    }

    /// The table covers every state, each with a stop and a session failure.
    @Test func everyStateHasItsRows() {
        for state in DeliveryLifecycleMatrixTests.states {
            let inputs = Self.rows.filter { $0.state == state.name }.map(\.input.name)
            #expect(inputs.contains(Input.stop.name), "\(state.name): no stop")
            #expect(inputs.contains { $0.hasPrefix("session failed") }, "\(state.name): no session failure")
        }
        for row in Self.rows {
            #expect(
                DeliveryLifecycleMatrixTests.states.contains { $0.name == row.state }, "\(row.state): no such state")
        }
    }
}

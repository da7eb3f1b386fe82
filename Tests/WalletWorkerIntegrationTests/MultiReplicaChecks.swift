import AMQPTransport
import Foundation

// What the multi-replica tests check once the run is over: each function returns the problems it finds (empty
// when all is well), named so that a failure says what was lost, doubled or out of order.

/// One copy of a result as the capture queue received it.
struct CapturedCopy: Sendable {
    var messageID: String?
    var exchange: String
    var routingKey: String
    var body: [UInt8]

    init(_ message: CapturedMessage) {
        messageID = message.properties.messageID
        exchange = message.exchange
        routingKey = message.routingKey
        body = message.body
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// `processedAt` as seconds since the epoch.
    var processedAt: Double? {
        guard let text = json["processedAt"] as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}

/// The captured results grouped by result id (`<inbound message_id>/<n>`), in order of first arrival.
struct ReplicaCapture: Sendable {
    var copies: [String: [CapturedCopy]] = [:]
    var firstArrival: [String] = []
    var withoutID = 0
    /// Distinct result indices by inbound id.
    var indicesByInbound: [String: Set<Int>] = [:]

    init(_ all: [CapturedCopy]) {
        for copy in all {
            guard let id = copy.messageID else {
                withoutID += 1
                continue
            }
            if copies[id] == nil {
                firstArrival.append(id)
                if let (inbound, index) = Self.split(id) { indicesByInbound[inbound, default: []].insert(index) }
            }
            copies[id, default: []].append(copy)
        }
    }

    static func split(_ resultID: String) -> (inbound: String, index: Int)? {
        guard let slash = resultID.lastIndex(of: "/"), let index = Int(resultID[resultID.index(after: slash)...]) else {
            return nil
        }
        return (String(resultID[..<slash]), index)
    }

    func first(_ id: String) -> CapturedCopy? { copies[id]?.first }

    /// The inbound message's results (first copies), by index.
    func results(of inbound: String) -> [CapturedCopy] {
        (indicesByInbound[inbound] ?? []).sorted().compactMap { first("\(inbound)/\($0)") }
    }

    /// Result copies beyond the first.
    var repeatedCopies: Int { copies.values.reduce(0) { $0 + $1.count - 1 } }
}

/// When the SIGKILL happened, for telling a redelivery it caused from a message processed twice for no reason.
struct KillInstant: Sendable {
    var time: Double
    /// A processing of the killed replica started at most this long before the kill (a batch, lock waits included).
    static let batchWindow = 30.0

    /// Two processings of one message, the first by the killed replica and the second after the kill.
    func explains(_ processedAt: [Double]) -> Bool {
        guard processedAt.count == 2 else { return processedAt.count < 2 }
        let sorted = processedAt.sorted()
        return sorted[0] <= time + 0.001 && sorted[0] >= time - Self.batchWindow && sorted[1] >= time - 0.001
    }
}

enum ReplicaChecks {
    // MARK: - Both modes

    /// Every inbound message has its results, `/0` to `/n-1` with nothing missing or extra, `n` as the results
    /// themselves say (a CPS message ends with `completed` or `errorEncountered` after one event per server message
    /// applied; every other message here publishes one result); no result without an id or of an unknown message.
    static func completeness(_ capture: ReplicaCapture, _ workload: ReplicaWorkload) -> [String] {
        var problems: [String] = []
        if capture.withoutID > 0 { problems.append("\(capture.withoutID) results without a message_id") }
        let known = workload.distinctIDs
        for inbound in capture.indicesByInbound.keys where !known.contains(inbound) {
            problems.append("results of an unknown message \(inbound)")
        }
        for id in known.sorted() {
            let indices = capture.indicesByInbound[id] ?? []
            guard !indices.isEmpty else {
                problems.append("\(id): no result (lost)")
                continue
            }
            guard indices == Set(0..<indices.count) else {
                problems.append("\(id): result indices \(indices.sorted()) (some lost)")
                continue
            }
            let results = capture.results(of: id)
            let keys = results.map(\.routingKey)
            if keys.first?.hasPrefix("card.") == true {
                let events = keys.filter { $0.hasPrefix("card.serverMessage.") }.count
                let last = keys.last ?? ""
                if (last != "card.completed" && last != "card.errorEncountered") || keys.count != events + 1 {
                    problems.append("\(id): CPS results \(keys) (incomplete)")
                }
            } else if keys.count != 1 {
                problems.append("\(id): \(keys.count) results \(keys), expected one")
            }
        }
        return problems
    }

    /// Copies of one result are byte-identical (a duplicate or a redelivery replays the recorded results). Rejected
    /// messages are not recorded (CONTRACT.md §8): one processed again after the kill gets a new `rejected` result
    /// that differs only in `processedAt`, which the kill must explain.
    static func replays(_ capture: ReplicaCapture, _ workload: ReplicaWorkload, kill: KillInstant) -> [String] {
        var problems: [String] = []
        for (id, copies) in capture.copies where copies.count > 1 {
            let distinct = Set(copies.map { [$0.exchange, $0.routingKey, String(decoding: $0.body, as: UTF8.self)] })
            guard distinct.count > 1 else { continue }
            guard let inbound = ReplicaCapture.split(id)?.inbound, workload.malformedIDs.contains(inbound) else {
                problems.append("\(id): \(distinct.count) different copies (applied twice?): "
                    + distinct.prefix(2).map { $0[2] }.joined(separator: "  <>  "))
                continue
            }
            let sameApartFromTime = Set(copies.map { timeIndependentText($0.body) }).count == 1
            let times = Set(copies.compactMap(\.processedAt))
            if !sameApartFromTime || !kill.explains(Array(times)) {
                problems.append("\(id): rejected \(times.count) times at \(times.sorted()) (kill at \(kill.time))")
            }
        }
        return problems.sorted()
    }

    /// The dead-letter queue holds exactly the malformed messages, once each; twice only when the kill explains it
    /// (dead-lettered by the killed replica, which died before acknowledging, then again after the redelivery).
    static func deadLetters(
        _ deadLetterIDs: [String?], _ capture: ReplicaCapture, _ workload: ReplicaWorkload, kill: KillInstant
    ) -> [String] {
        var problems: [String] = []
        var counts: [String: Int] = [:]
        for id in deadLetterIDs {
            guard let id else {
                problems.append("a dead letter without a message_id")
                continue
            }
            counts[id, default: 0] += 1
        }
        for id in counts.keys where !workload.malformedIDs.contains(id) {
            problems.append("\(id) was dead-lettered but is not malformed")
        }
        for id in workload.malformedIDs.sorted() {
            let count = counts[id] ?? 0
            let processings = Set((capture.copies["\(id)/0"] ?? []).compactMap(\.processedAt))
            if count == 0 {
                problems.append("\(id) is missing from the dead-letter queue")
            } else if count > 1 && (count > processings.count || !kill.explains(Array(processings))) {
                problems.append("\(id) dead-lettered \(count) times, rejected at \(processings.sorted()) (kill at \(kill.time))")
            }
        }
        return problems
    }

    /// Processed ids in the store are the distinct ids of every message that was not rejected: each recorded once
    /// (the primary key), none lost, no rejected one.
    static func processedIDs(_ database: ReplicaDatabase.Contents, _ workload: ReplicaWorkload) -> [String] {
        let expected = workload.distinctIDs.subtracting(workload.malformedIDs)
        let stored = Set(database.processedIDs)
        var problems: [String] = []
        if stored.count != database.processedIDs.count { problems.append("processed ids recorded more than once") }
        let missing = expected.subtracting(stored), extra = stored.subtracting(expected)
        if !missing.isEmpty { problems.append("\(missing.count) processed ids missing, e.g. \(missing.sorted().prefix(3))") }
        if !extra.isEmpty { problems.append("\(extra.count) unexpected processed ids, e.g. \(extra.sorted().prefix(3))") }
        return problems
    }

    // MARK: - Ordered mode: exactly the in-process model

    /// Every result the model publishes, no other, each (apart from the processing time) as the model has it; per
    /// card (and among the messages without a card header) in the model's order, by first arrival.
    static func sameAsModel(_ capture: ReplicaCapture, _ model: ReplicaModel) -> [String] {
        var problems: [String] = []
        var expectedIDs = Set<String>()
        for (_, results) in model.resultsByInbound {
            for expected in results {
                expectedIDs.insert(expected.id)
                guard let actual = capture.first(expected.id) else { continue }
                if actual.exchange != expected.exchange || actual.routingKey != expected.routingKey
                    || timeIndependentText(actual.body) != timeIndependentText(expected.body)
                {
                    problems.append("\(expected.id): published \(actual.routingKey) "
                        + "\(String(decoding: actual.body, as: UTF8.self)), the sequence implies \(expected.routingKey) "
                        + String(decoding: expected.body, as: UTF8.self))
                }
            }
        }
        let actualIDs = Set(capture.copies.keys)
        let missing = expectedIDs.subtracting(actualIDs), extra = actualIDs.subtracting(expectedIDs)
        if !missing.isEmpty { problems.append("\(missing.count) results missing, e.g. \(missing.sorted().prefix(4))") }
        if !extra.isEmpty { problems.append("\(extra.count) unexpected results, e.g. \(extra.sorted().prefix(4))") }

        var groupOf: [String: String] = [:]
        for (group, ids) in model.resultOrderByGroup { for id in ids { groupOf[id] = group } }
        var arrivedByGroup: [String: [String]] = [:]
        for id in capture.firstArrival { if let group = groupOf[id] { arrivedByGroup[group, default: []].append(id) } }
        for (group, expected) in model.resultOrderByGroup {
            let arrived = arrivedByGroup[group] ?? []
            guard arrived != expected.filter(actualIDs.contains) else { continue }
            let at = zip(arrived, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? 0
            problems.append("\(group.isEmpty ? "messages without a card" : group): results out of order from \(at): "
                + "got \(arrived.dropFirst(at).prefix(4)), expected \(expected.dropFirst(at).prefix(4))")
        }
        return problems.sorted()
    }

    /// The store's cards and transaction histories are the model's.
    static func storeMatchesModel(_ database: ReplicaDatabase.Contents, _ model: ReplicaModel) -> [String] {
        var problems: [String] = []
        let expectedCards = model.state.cards.mapValues {
            ReplicaDatabase.Card(state: $0.state.rawValue, tokenizedCardId: $0.tokenizedCardId, keyType: $0.keyType.rawValue,
                                 paymentsLeft: $0.paymentKeys?.numberOfPaymentsLeft)
        }
        for card in Set(expectedCards.keys).union(database.cards.keys).sorted() where expectedCards[card] != database.cards[card] {
            problems.append("\(card): stored \(database.cards[card].map(String.init(describing:)) ?? "absent"), "
                + "the sequence implies \(expectedCards[card].map(String.init(describing:)) ?? "absent")")
        }
        for card in Set(model.state.cards.keys).union(database.records.keys).sorted() {
            let expected = model.state.transactions(digitalCardId: card).map(\.id)
            let stored = database.records[card] ?? []
            if stored != expected {
                problems.append("\(card): records \(stored.count) stored \(stored.prefix(5)), \(expected.count) expected \(expected.prefix(5))")
            }
        }
        return problems
    }

    // MARK: - Default mode: a state reachable by the CPS table, no lost update

    /// Per card: every CPS event a legal transition of CONTRACT.md §3; all of them one chain from absent (each event
    /// starting in the state the one before it left, in some order) that ends in the stored state (a lost update
    /// leaves two events starting from the same state); the stored card as installed. Its transaction records:
    /// exactly those whose TNS message was answered with the records (not an error), each stored once.
    static func cardHistories(_ capture: ReplicaCapture, _ workload: ReplicaWorkload, _ database: ReplicaDatabase.Contents)
        -> [String]
    {
        var problems: [String] = []
        var events: [String: [[String: Any]]] = [:]
        var acceptedRecords: [String: Set<String>] = [:]
        var seen = Set<String>()
        for message in workload.main where !message.isMalformed && seen.insert(message.id).inserted {
            guard let card = message.cardHeader else { continue }
            for result in capture.results(of: message.id) {
                let json = result.json
                if result.routingKey.hasPrefix("card.serverMessage.") || result.routingKey == "card.errorEncountered" {
                    events[card, default: []].append(json)
                }
                if let record = message.recordID, result.routingKey == "transactions.records" {
                    acceptedRecords[card, default: []].insert(record)
                }
            }
        }
        for (index, card) in workload.cards.enumerated() {
            let stored = database.cards[card]
            let final = stored?.state ?? "absent"
            var chain = CardStateChain()
            for event in events[card] ?? [] {
                if let problem = chain.add(event) { problems.append("\(card): \(problem)") }
            }
            if let problem = chain.problem(endingIn: final) { problems.append("\(card): \(problem)") }
            if let stored {
                let keyType = ReplicaWorkload.keyType(index) ?? "SUK"
                if stored.tokenizedCardId != ReplicaWorkload.tokenizedCard(card) || stored.keyType != keyType {
                    problems.append("\(card): stored \(stored), installed with \(keyType)")
                }
            }
            let records = database.records[card] ?? []
            if Set(records).count != records.count { problems.append("\(card): a record stored twice: \(records.sorted())") }
            let accepted = acceptedRecords[card] ?? []
            if Set(records) != accepted {
                problems.append("\(card): records stored \(Set(records).subtracting(accepted).sorted()) not accepted, "
                    + "accepted \(accepted.subtracting(records).sorted()) not stored")
            }
        }
        return problems
    }
}

/// A card's CPS events as edges between states (absent, active, suspended, deleted): an event that changes nothing
/// or is refused is a loop. One serial order explains them all exactly when the edges form one trail from absent
/// to the final state (Euler's condition: each state entered as often as left, except the two ends; every state
/// that occurs reachable from absent).
struct CardStateChain {
    private var outDegree: [String: Int] = [:]
    private var inDegree: [String: Int] = [:]
    private var edges: [String: Set<String>] = [:]
    private var touched: Set<String> = []

    private static func state(_ value: Any?) -> String? {
        switch value {
        case nil, is NSNull: "absent"
        case let text as String where ["active", "suspended", "deleted"].contains(text): text
        default: nil
        }
    }

    /// Adds one event (a `serverMessage` or `errorEncountered` result body); a problem when it is not a legal
    /// transition.
    mutating func add(_ event: [String: Any]) -> String? {
        let known = event["knownMessage"] as? String
        let name = event["event"] as? String
        guard let state = Self.state(event["state"]) else { return "event with state \(event["state"] ?? "?")" }
        let previous: String
        if name == "errorEncountered" {
            let refused: Set<String> = switch known {
            case "requestInstallCard"?: ["suspended", "deleted"]
            case "requestSuspendCard"?, "requestResumeCard"?: ["absent", "deleted"]
            case "requestDeleteCard"?: ["absent"]
            case "requestReplenishKeys"?: ["absent", "suspended", "deleted"]
            default: []
            }
            guard refused.contains(state) else { return "\(known ?? "informational") refused on a card \(state)" }
            previous = state
        } else {
            guard let before = Self.state(event["previousState"]) else { return "event without a previous state" }
            let changed = event["changed"] as? Bool ?? false
            let legal: Set<[String]> = switch known {
            case "requestInstallCard"?: [["absent", "active"], ["active", "active"]]
            case "requestSuspendCard"?: [["active", "suspended"], ["suspended", "suspended"]]
            case "requestResumeCard"?: [["suspended", "active"], ["active", "active"]]
            case "requestDeleteCard"?: [["active", "deleted"], ["suspended", "deleted"], ["deleted", "deleted"]]
            case "requestReplenishKeys"?: [["active", "active"]]
            case nil: [[before, before]]
            default: []
            }
            guard legal.contains([before, state]), changed == (before != state) else {
                return "\(known ?? "informational") went \(before) -> \(state) (changed: \(changed))"
            }
            previous = before
        }
        outDegree[previous, default: 0] += 1
        inDegree[state, default: 0] += 1
        edges[previous, default: []].insert(state)
        touched.formUnion([previous, state])
        return nil
    }

    /// Nil when the events form one trail from absent to `final`.
    func problem(endingIn final: String) -> String? {
        for state in touched.union(["absent", final]) {
            let balance = (outDegree[state] ?? 0) - (inDegree[state] ?? 0)
            let expected = final == "absent" ? 0 : (state == "absent" ? 1 : (state == final ? -1 : 0))
            if balance != expected {
                return "its events do not chain from absent to \(final) (\(state) left \(outDegree[state] ?? 0) "
                    + "times, entered \(inDegree[state] ?? 0) times): a lost or doubled update"
            }
        }
        var reached: Set<String> = ["absent"]
        var frontier = ["absent"]
        while let state = frontier.popLast() {
            for next in edges[state] ?? [] where reached.insert(next).inserted { frontier.append(next) }
        }
        let unreachable = touched.subtracting(reached)
        return unreachable.isEmpty ? nil : "events in \(unreachable.sorted()) unreachable from absent"
    }
}

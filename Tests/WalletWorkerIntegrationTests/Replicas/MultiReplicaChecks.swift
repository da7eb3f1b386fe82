import Foundation

// What the multi-replica tests check once the run is over: each function returns the problems it finds (empty
// when all is well), named so that a failure says what was lost, doubled or out of order.

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
                problems.append(
                    "\(id): \(distinct.count) different copies (applied twice?): "
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
                problems.append(
                    "\(id) dead-lettered \(count) times, rejected at \(processings.sorted()) (kill at \(kill.time))")
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
        let missing = expected.subtracting(stored)
        let extra = stored.subtracting(expected)
        if !missing.isEmpty {
            problems.append("\(missing.count) processed ids missing, e.g. \(missing.sorted().prefix(3))")
        }
        if !extra.isEmpty {
            problems.append("\(extra.count) unexpected processed ids, e.g. \(extra.sorted().prefix(3))")
        }
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
                    problems.append(
                        "\(expected.id): published \(actual.routingKey) "
                            + "\(String(decoding: actual.body, as: UTF8.self)), the sequence implies \(expected.routingKey) "
                            + String(decoding: expected.body, as: UTF8.self))
                }
            }
        }
        let actualIDs = Set(capture.copies.keys)
        let missing = expectedIDs.subtracting(actualIDs)
        let extra = actualIDs.subtracting(expectedIDs)
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
            problems.append(
                "\(group.isEmpty ? "messages without a card" : group): results out of order from \(at): "
                    + "got \(arrived.dropFirst(at).prefix(4)), expected \(expected.dropFirst(at).prefix(4))")
        }
        return problems.sorted()
    }

    /// The store's cards and transaction histories are the model's.
    static func storeMatchesModel(_ database: ReplicaDatabase.Contents, _ model: ReplicaModel) -> [String] {
        var problems: [String] = []
        let expectedCards = model.state.cards.mapValues {
            ReplicaDatabase.Card(
                state: $0.state.rawValue, tokenizedCardId: $0.tokenizedCardId, keyType: $0.keyType.rawValue,
                paymentsLeft: $0.paymentKeys?.numberOfPaymentsLeft)
        }
        for card in Set(expectedCards.keys).union(database.cards.keys).sorted()
        where expectedCards[card] != database.cards[card] {
            problems.append(
                "\(card): stored \(database.cards[card].map(String.init(describing:)) ?? "absent"), "
                    + "the sequence implies \(expectedCards[card].map(String.init(describing:)) ?? "absent")")
        }
        for card in Set(model.state.cards.keys).union(database.records.keys).sorted() {
            let expected = model.state.transactions(digitalCardId: card).map(\.id)
            let stored = database.records[card] ?? []
            if stored != expected {
                problems.append(
                    "\(card): records \(stored.count) stored \(stored.prefix(5)), \(expected.count) expected \(expected.prefix(5))"
                )
            }
        }
        return problems
    }

    // MARK: - Default mode: a state reachable by the CPS table, no lost update

    /// Per card: every CPS event a legal transition of CONTRACT.md §3; all of them one chain from absent (each event
    /// starting in the state the one before it left, in some order) that ends in the stored state (a lost update
    /// leaves two events starting from the same state); the stored card as installed. Its transaction records:
    /// exactly those whose TNS message was answered with the records (not an error), each stored once.
    static func cardHistories(
        _ capture: ReplicaCapture, _ workload: ReplicaWorkload, _ database: ReplicaDatabase.Contents
    )
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
            if Set(records).count != records.count {
                problems.append("\(card): a record stored twice: \(records.sorted())")
            }
            let accepted = acceptedRecords[card] ?? []
            if Set(records) != accepted {
                problems.append(
                    "\(card): records stored \(Set(records).subtracting(accepted).sorted()) not accepted, "
                        + "accepted \(accepted.subtracting(records).sorted()) not stored")
            }
        }
        return problems
    }
}

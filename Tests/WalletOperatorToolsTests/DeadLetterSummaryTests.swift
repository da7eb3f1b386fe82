import AMQPTransport
import Foundation
import Testing

@testable import WalletOperatorTools

/// `dead-letters summary` (the groups, bounded) and `--limit` (the first that match, in queue order), without a
/// broker.
@Suite struct DeadLetterSummaryTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let deadLetterQueue = "wallet.notifications.dead"

    func letter(
        reason: String, sender: String = "TNS", routingKey: String = "backend.tns", timestamp: UInt64? = nil,
        death: UInt64? = nil
    ) -> DeadLetter {
        var headers: AMQPTable = ["x-worker-error": .string(reason)]
        if let death {
            headers["x-death"] = .array([
                .table(["reason": .string("rejected"), "queue": .string("q"), "time": .timestamp(death)])
            ])
        }
        return DeadLetter(
            DeadLetterMessage(
                body: Array(#"{"sender":"\#(sender)"}"#.utf8),
                properties: AMQPMessageProperties(headers: headers, messageID: "m", timestamp: timestamp),
                routingKey: routingKey),
            deadLetterQueue: Self.deadLetterQueue)
    }

    @Test func lettersAreGroupedByReasonSenderAndRoutingKeyTheLargestFirst() {
        var groups = DeadLetterGroups()
        groups.add(letter(reason: "store refused", timestamp: 1_800_000_000 - 300))
        groups.add(
            letter(reason: "retries exhausted", sender: "MG", routingKey: "backend.mg", timestamp: 1_799_990_000))
        groups.add(
            letter(reason: "retries exhausted", sender: "MG", routingKey: "backend.mg", timestamp: 1_799_999_000))
        groups.add(letter(reason: "retries exhausted", sender: "MG", routingKey: "backend.other"))
        let rows = groups.rows
        #expect(rows.map(\.group.count) == [2, 1, 1])
        #expect(rows[0].key == .init(reason: "retries exhausted", sender: "MG", routingKey: "backend.mg"))
        #expect(rows[0].group.oldest == Date(timeIntervalSince1970: 1_799_990_000))
        #expect(rows[0].group.newest == Date(timeIntervalSince1970: 1_799_999_000))
        // Ties in count: by reason, then sender, then routing key.
        #expect(rows[1].key.reason == "retries exhausted" && rows[2].key.reason == "store refused")
        #expect(groups.total.count == 4 && groups.total.withoutTimestamp == 1)
        #expect(groups.total.oldest == Date(timeIntervalSince1970: 1_799_990_000))
    }

    @Test func withoutATimestampALetterIsCountedAndAgedByItsDeadLettering() {
        var groups = DeadLetterGroups()
        groups.add(letter(reason: "r", death: 1_799_000_000))
        groups.add(letter(reason: "r"))
        let group = groups.rows[0].group
        #expect(group.count == 2 && group.withoutTimestamp == 2)
        #expect(group.oldest == Date(timeIntervalSince1970: 1_799_000_000) && group.newest == group.oldest)
        let table = groups.tableLines(at: now)
        #expect(table.last?.hasPrefix("2 of them have no AMQP timestamp") == true, "\(table)")
    }

    @Test func theGroupsAreBoundedAndTheTotalsStayExact() {
        var groups = DeadLetterGroups(maximumGroups: 3, maximumReasonLength: 10)
        for index in 0..<10 { groups.add(letter(reason: "reason \(index)", timestamp: 1_799_999_000 + UInt64(index))) }
        groups.add(letter(reason: "reason 0"))
        groups.add(letter(reason: String(repeating: "x", count: 50)))
        #expect(groups.groups.count == 3)
        #expect(groups.rows[0].group.count == 2, "a group already present still counts")
        #expect(groups.otherGroups.count == 8 && groups.total.count == 12)
        #expect(groups.groups.keys.allSatisfy { $0.reason.count <= 10 })
        let json = groups.jsonLines()
        #expect(json.count == 5, "three groups, the others, the total")
        #expect(json.last?.contains(#""count":12"#) == true && json.last?.contains(#""total":true"#) == true)
        #expect(json[3].contains(#""otherGroups":true"#) && json[3].contains(#""count":8"#))
    }

    @Test func aLimitSelectsTheFirstThatMatchAndKeepsTheRest() {
        var filter = DeadLetterFilter()
        filter.sender = "tns"
        var pass = DeadLetterPass(
            command: .purge, filter: filter, deadLetterQueue: Self.deadLetterQueue, markerID: "run", now: now)
        pass.limit = 2
        let message = DeadLetterMessage(
            body: Array(#"{"sender":"TNS"}"#.utf8),
            properties: AMQPMessageProperties(headers: ["x-worker-error": .string("bad")]), routingKey: "k")
        #expect(pass.decide(message, selectedBefore: 0).action == .remove)
        #expect(pass.decide(message, selectedBefore: 1).selected)
        let beyond = pass.decide(message, selectedBefore: 2)
        #expect(!beyond.selected && beyond.action == .keep(.throughLoop), "past the limit a match is kept")
    }
}

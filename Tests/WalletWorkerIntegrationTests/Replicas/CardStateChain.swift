import Foundation

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
            let refused: Set<String> =
                switch known {
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
            let legal: Set<[String]> =
                switch known {
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

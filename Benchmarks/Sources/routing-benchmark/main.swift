// Measures the routing core on one core: parse, route, encode (all inside `NotificationRouter.route`) and applying
// the effects to an `InMemoryWalletState`, over a realistic mix of notifications. See README.md.
import BenchmarkWorkload
import CAllocationCounter
import Foundation
import WalletRouting

struct Options {
    var messages = 200_000
    var runs = 7

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--messages": messages = iterator.next().flatMap(Int.init) ?? messages
            case "--runs": runs = iterator.next().flatMap(Int.init) ?? runs
            default:
                print("usage: routing-benchmark [--messages N] [--runs N]")
                exit(2)
            }
        }
    }
}

let options = Options(arguments: CommandLine.arguments)
let now = Date(timeIntervalSince1970: 1_795_248_000)  // 2026-11-21T08:00:00Z
let router = NotificationRouter()
let cpu = CAllocationCounter_pinToCurrentCPU()

// MARK: - Allocation counter self-check

/// 1,000 class instances must count as (at least) 1,000 allocations, or the interposer is not in effect.
final class Probe {
    var value: Int
    init(_ value: Int) { self.value = value }
}

/// The probes escape into an array, so none of them can be promoted to the stack.
@inline(never)
func allocateProbes(_ count: Int) -> [Probe] {
    var probes: [Probe] = []
    probes.reserveCapacity(count)
    for index in 0..<count { probes.append(Probe(index)) }
    return probes
}

let probeBefore = CAllocationCounter_count()
let probeSum = allocateProbes(1_000).count
let probeAllocations = CAllocationCounter_count() - probeBefore

// MARK: - Workload

let workload = Workload(count: options.messages)
var installed = InMemoryWalletState()
for message in workload.setup {
    installed.apply(try router.route(message, state: installed, now: now).effects)
}
let sizes = workload.messages.map(\.body.count).sorted()
var share: [MessageKind: Int] = [:]
for kind in workload.kinds { share[kind, default: 0] += 1 }

print(
    "routing-benchmark: \(workload.messages.count) messages over \(Workload.cardCount) pre-installed cards, "
        + "\(options.runs) runs, pinned to CPU \(cpu >= 0 ? String(cpu) : "none (not supported)")")
print(
    "  mix: "
        + MessageKind.allCases.map { kind in
            "\(kind.rawValue) \(String(format: "%.1f", 100 * Double(share[kind, default: 0]) / Double(workload.kinds.count)))%"
        }.joined(separator: ", "))
print("  body bytes: min \(sizes.first ?? 0), median \(sizes[sizes.count / 2]), max \(sizes.last ?? 0)")
for kind in MessageKind.allCases {
    let kindSizes = zip(workload.messages, workload.kinds).filter { $0.1 == kind }.map(\.0.body.count).sorted()
    guard let first = kindSizes.first, let last = kindSizes.last else { continue }
    print("    \(kind.rawValue): \(first)-\(last) bytes, median \(kindSizes[kindSizes.count / 2])")
}
if CAllocationCounter_isAvailable() == 1 {
    print(
        "  allocation counter self-check: \(probeAllocations) allocations counted for \(probeSum) objects and their array"
    )
}

// MARK: - Routing

/// One pass over the workload from the installed state: route, then apply the effects, message after message.
@MainActor @inline(never)
func routeAll() throws -> (seconds: Double, results: Int, allocations: UInt64) {
    var state = installed
    state.apply([])  // nothing to copy lazily inside the timed loop
    var results = 0
    let clock = ContinuousClock()
    let allocationsBefore = CAllocationCounter_count()
    let start = clock.now
    for message in workload.messages {
        let decision = try router.route(message, state: state, now: now)
        results &+= decision.results.count
        state.apply(decision.effects)
    }
    let elapsed = clock.now - start
    let allocations = CAllocationCounter_count() - allocationsBefore
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (seconds, results, allocations)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func formatted(_ value: Double) -> String {
    let number = NumberFormatter()
    number.numberStyle = .decimal
    number.maximumFractionDigits = 0
    return number.string(from: NSNumber(value: value.rounded())) ?? String(Int(value))
}

_ = try routeAll()  // warm-up
var rates: [Double] = []
var allocationCounts: [UInt64] = []
var resultCount = 0
for run in 1...options.runs {
    let (seconds, results, allocations) = try routeAll()
    let rate = Double(workload.messages.count) / seconds
    rates.append(rate)
    allocationCounts.append(allocations)
    resultCount = results
    print("  run \(run): \(formatted(rate)) notifications/s (\(String(format: "%.3f", seconds)) s)")
}
let perNotification = Double(allocationCounts.sorted()[allocationCounts.count / 2]) / Double(workload.messages.count)

// Allocations per message kind, one message at a time (a separate, untimed pass).
var allocationsByKind: [MessageKind: UInt64] = [:]
do {
    var state = installed
    state.apply([])
    for (message, kind) in zip(workload.messages, workload.kinds) {
        let before = CAllocationCounter_count()
        let decision = try router.route(message, state: state, now: now)
        state.apply(decision.effects)
        allocationsByKind[kind, default: 0] += CAllocationCounter_count() - before
    }
}

// MARK: - Reference: Foundation's JSONSerialization parsing the same bodies (parse only, nothing routed)

/// Parse-only rates over the same bodies, for comparison: the routing core's parser, then Foundation's.
@MainActor
func parseRate(runs: Int, _ parse: ([UInt8]) -> Bool) -> Double {
    var rates: [Double] = []
    for _ in 0..<runs {
        let clock = ContinuousClock()
        var parsed = 0
        let start = clock.now
        for message in workload.messages where parse(message.body) { parsed &+= 1 }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        rates.append(Double(workload.messages.count) / seconds)
        if parsed == 0 { print("nothing parsed") }
    }
    return median(rates)
}

let ownParseRate = parseRate(runs: max(3, options.runs / 2)) { (try? JSONParser.parse($0)) != nil }
let bodies = workload.messages.map { Data($0.body) }
var foundationRates: [Double] = []
for _ in 0..<max(3, options.runs / 2) {
    let clock = ContinuousClock()
    var parsed = 0
    let start = clock.now
    for body in bodies {
        if (try? JSONSerialization.jsonObject(with: body)) != nil { parsed &+= 1 }
    }
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    foundationRates.append(Double(bodies.count) / seconds)
    if parsed == 0 { print("nothing parsed") }
}

print("")
print(
    "median: \(formatted(median(rates))) notifications/s on one core (route + apply effects; "
        + "\(resultCount) results per pass)")
if CAllocationCounter_isAvailable() == 1, probeAllocations < 1_000 {
    print("heap allocations: counter not in effect (1,000 objects counted as \(probeAllocations) for \(probeSum))")
} else if CAllocationCounter_isAvailable() == 1 {
    print(
        "heap allocations: \(String(format: "%.1f", perNotification)) per notification (median run); by kind: "
            + MessageKind.allCases.map { kind in
                "\(kind.rawValue) \(String(format: "%.1f", Double(allocationsByKind[kind, default: 0]) / Double(max(1, share[kind, default: 0]))))"
            }.joined(separator: ", "))
} else {
    print("heap allocations: not counted on this platform (the interposer needs Linux with glibc)")
}
print("parse only: WalletRouting's JSONParser parses \(formatted(ownParseRate)) bodies/s")
print(
    "reference: Foundation JSONSerialization parses \(formatted(median(foundationRates))) bodies/s "
        + "(the same bodies, parse only, median of \(foundationRates.count))")
print("target: 150,000 notifications/s: \(median(rates) >= 150_000 ? "met" : "NOT met")")

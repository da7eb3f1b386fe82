import BenchmarkWorkload
import Foundation
import WalletRouting
import WalletStore

// The store's share of the worker, without the broker: the end-to-end benchmark's workload (setup phase, then
// the measured mix) through `WalletStore.process` in batches, as the worker calls it, on a fresh SQLite file.
// Prints CPU µs per measured message (user + system, this process) and the wall-clock rate.
//
//   swift run -c release store-benchmark [--messages N] [--batch B] [--store memory|sqlite] [--file PATH]
//
// --file: the SQLite file to use instead of a fresh one in a temporary directory (e.g. one created beforehand with
// another page size: `sqlite3 F 'PRAGMA page_size = 1024; PRAGMA journal_mode = WAL'`); it is not removed.
// Also prints the bytes written per measured message (/proc/self/io wchar: WAL frames and checkpoints).

var messageCount = 100_000
var batchSize = 100
var storeKind = "sqlite"
var filePath: String?
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--messages": messageCount = Int(arguments.next() ?? "") ?? messageCount
    case "--batch": batchSize = Int(arguments.next() ?? "") ?? batchSize
    case "--store": storeKind = arguments.next() ?? storeKind
    case "--file": filePath = arguments.next()
    default:
        FileHandle.standardError.write(
            Data("usage: store-benchmark [--messages N] [--batch B] [--store memory|sqlite] [--file PATH]\n".utf8))
        exit(2)
    }
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// The bytes this process has written with write(2) and friends so far (/proc/self/io wchar).
func bytesWritten() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return .nan }
    for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? .nan
    }
    return .nan
}

let workload = Workload(count: messageCount)
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("store-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }
let store: any WalletStore =
    storeKind == "memory"
    ? try WalletStores.open(.memory)
    : try WalletStores.open(.sqlite(path: filePath ?? directory.appendingPathComponent("bench.sqlite").path))
let router = NotificationRouter()
let now = Date(timeIntervalSince1970: 1_795_248_000)

@MainActor func run(_ messages: [InboundMessage]) async throws -> Int {
    var results = 0
    var start = messages.startIndex
    while start < messages.endIndex {
        let end = min(start + batchSize, messages.endIndex)
        let decisions = try await store.process(Array(messages[start..<end]), router: router, now: now)
        results += decisions.reduce(0) { $0 + $1.decision.results.count }
        start = end
    }
    return results
}

_ = try await run(workload.setup)
let cpuBefore = cpuSeconds()
let writtenBefore = bytesWritten()
let clockBefore = ContinuousClock.now
let results = try await run(workload.messages)
let elapsed = ContinuousClock.now - clockBefore
let cpu = cpuSeconds() - cpuBefore
let written = bytesWritten() - writtenBefore
await store.close()
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(
    String(
        format: "store-benchmark %@: %d messages (after %d setup), batches of %d: %.1f CPU µs/msg, %.0f msg/s, "
            + "%.2f results/msg, %.0f bytes written/msg",
        storeKind, messageCount, workload.setup.count, batchSize, 1e6 * cpu / Double(messageCount),
        Double(messageCount) / seconds, Double(results) / Double(messageCount), written / Double(messageCount)))

import BenchmarkWorkload
import Foundation
import WalletRouting
import WalletStore

// The store's share of the worker, without the broker: the end-to-end benchmark's workload (setup phase, then
// the measured mix) through `WalletStore.process` in batches, as the worker calls it, on a fresh SQLite file.
// Prints CPU µs per measured message (user + system, this process) and the wall-clock rate.
//
//   swift run -c release store-benchmark [--messages N] [--batch B] [--store memory|sqlite] [--file PATH] [--pages]
//
// --file: the SQLite file to use instead of a fresh one in a temporary directory (e.g. one created beforehand with
// another page size: `sqlite3 F 'PRAGMA page_size = 1024; PRAGMA journal_mode = WAL'`); it is not removed.
// Also prints the bytes written per measured message (/proc/self/io wchar: WAL frames and checkpoints).
// --pages (SQLite): also reads the write-ahead log after every measured batch and prints the pages written per
// message by the table or index they belong to (`WALPageCounter`): what the bytes are made of. The reading costs
// CPU: the CPU figure of such a run is not comparable.

var messageCount = 100_000
var batchSize = 100
var storeKind = "sqlite"
var filePath: String?
var countsPages = false
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--messages": messageCount = Int(arguments.next() ?? "") ?? messageCount
    case "--batch": batchSize = Int(arguments.next() ?? "") ?? batchSize
    case "--store": storeKind = arguments.next() ?? storeKind
    case "--file": filePath = arguments.next()
    case "--pages": countsPages = true
    default:
        FileHandle.standardError.write(
            Data(
                "usage: store-benchmark [--messages N] [--batch B] [--store memory|sqlite] [--file PATH] [--pages]\n"
                    .utf8))
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
let databasePath = filePath ?? directory.appendingPathComponent("bench.sqlite").path
let store: any WalletStore =
    storeKind == "memory" ? try WalletStores.open(.memory) : try WalletStores.open(.sqlite(path: databasePath))
var walPages: WALPageCounter? = countsPages && storeKind != "memory" ? WALPageCounter(databasePath: databasePath) : nil
let router = NotificationRouter()
let now = Date(timeIntervalSince1970: 1_795_248_000)

@MainActor func run(_ messages: [InboundMessage], countingPages: Bool = false) async throws -> Int {
    var results = 0
    var start = messages.startIndex
    while start < messages.endIndex {
        let end = min(start + batchSize, messages.endIndex)
        let decisions = try await store.process(Array(messages[start..<end]), router: router, now: now)
        results += decisions.reduce(0) { $0 + $1.decision.results.count }
        if countingPages { walPages?.readNewFrames() }
        start = end
    }
    return results
}

_ = try await run(workload.setup)
walPages?.readNewFrames()
let framesBefore = walPages?.frames ?? 0
let pagesBefore = walPages?.pages ?? [:]
let cpuBefore = cpuSeconds()
let writtenBefore = bytesWritten()
let clockBefore = ContinuousClock.now
let results = try await run(workload.messages, countingPages: true)
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

if var counter = walPages {
    // Only the measured phase's frames: the setup phase's are taken away page by page.
    for (page, count) in pagesBefore { counter.subtract(page: page, count: count) }
    let measuredFrames = counter.frames - framesBefore
    let perMessage = { (frames: Int) in Double(frames) / Double(messageCount) }
    print(
        String(
            format:
                "write-ahead log: %.2f pages of 4 KiB per message (%.0f bytes with frame headers); by table or index:",
            perMessage(measuredFrames), perMessage(measuredFrames) * 4120))
    for (name, frames) in try counter.framesByBTree(databasePath: databasePath) where frames > 0 {
        print(String(format: "  %6.3f pages/msg  %@", perMessage(frames), name))
    }
}

// The end-to-end benchmark's helper (scripts/benchmark-worker.sh, JOURNAL.md "End-to-end benchmark"):
//
//   worker-load prepare                    sink queue bound to the five result exchanges (one per exchange with
//                                          BENCH_SINK_PER_EXCHANGE=1); purges the work, retry, dead-letter and sink
//                                          queues (the worker's topology must exist: `wallet-worker declare`)
//   worker-load preload --messages N       publishes the setup phase (card installs, states, histories), then N
//                                          notifications of the mix: persistent, message_id, publisher confirms
//   worker-load result-size --messages N   what the worker publishes for the mix (routing core + in-memory state):
//                                          results per notification and mean result body bytes (sizes the baseline)
//   worker-load watch --pid P[,P...] --measured N [--server-pid S] [--broker-pid B]
//                                          waits until only the last N messages are ready in the work queue, then
//                                          until none is; prints the window, the CPU time of the processes P in it
//                                          (summed) and their peak RSS (summed); with --server-pid, also the CPU time
//                                          of S and its children in the window (a PostgreSQL server: postmaster and
//                                          backends); with --broker-pid, the CPU time of B (RabbitMQ's Erlang VM);
//                                          and the I/O of the processes P in it (/proc/P/io: read and write system
//                                          calls and bytes, sockets and files alike); with BENCH_ALLOC_COUNT_DIR set
//                                          (processes started with Benchmarks/alloc-count's preload), their heap
//                                          allocations in it
//
// Environment: AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f) and the worker's WALLET_* names.
import AMQPTransport
import BenchmarkWorkload
import Foundation
import Logging
import WalletRouting

let environment = ProcessInfo.processInfo.environment
let amqpURL = environment["AMQP_URL"] ?? "amqp://guest:guest@127.0.0.1:5672/%2f"
let inboundExchange = environment["WALLET_INBOUND_EXCHANGE"] ?? "wallet.notifications"
let workQueue = environment["WALLET_WORK_QUEUE"] ?? "wallet.notifications.work"
let retryQueue = environment["WALLET_RETRY_QUEUE"] ?? "wallet.notifications.retry"
let deadLetterQueue = environment["WALLET_DEAD_LETTER_QUEUE"] ?? "wallet.notifications.dead"
let sinkQueue = environment["BENCH_SINK_QUEUE"] ?? "bench.results"
let resultExchanges = ["EVENTS", "TRANSACTIONS", "REPLENISHMENT", "ACTIONS", "INSTALLATIONS"].map {
    environment["WALLET_\($0)_EXCHANGE"] ?? "wallet.\($0.lowercased())"
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("worker-load: \(message)\n".utf8))
    exit(1)
}

func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func connect(_ name: String) async throws -> AMQPConnection {
    var logger = Logger(label: "worker-load")
    logger.logLevel = .warning
    var configuration = AMQPConnectionConfiguration(url: try AMQPURL(parsing: amqpURL))
    configuration.connectionName = name
    return try await AMQPConnection.connect(configuration: configuration, logger: logger)
}

func monotonicSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

// MARK: - prepare

func prepare() async throws {
    let connection = try await connect("worker-load prepare")
    let channel = try await connection.openChannel()
    // Durable, like a downstream consumer's queue: the results are persistent and written to disk as they would be.
    // BENCH_SINK_PER_EXCHANGE=1: one queue per result exchange, as separate downstream consumers would have.
    let perExchange = environment["BENCH_SINK_PER_EXCHANGE"] == "1"
    let single = [sinkQueue]
    let split = resultExchanges.map { "\(sinkQueue).\($0)" }
    // The other layout's queues would receive copies too (the broker would do twice the work): delete them.
    for queue in perExchange ? single : split {
        _ = try await channel.deleteQueue(queue)
    }
    let sinks = perExchange ? split : single
    for (index, exchange) in resultExchanges.enumerated() {
        let sink = sinks[perExchange ? index : 0]
        try await channel.declareQueue(sink, durable: true)
        try await channel.bindQueue(sink, exchange: exchange, routingKey: "#")
    }
    var purged: [String] = []
    for queue in [workQueue, retryQueue, deadLetterQueue] + sinks {
        purged.append("\(queue) \(try await channel.purgeQueue(queue))")
    }
    print(
        "prepared: sinks \(sinks.joined(separator: ", ")) bound to \(resultExchanges.joined(separator: ", ")); purged: \(purged.joined(separator: ", "))"
    )
    await connection.close()
}

// MARK: - preload

func outbound(_ message: InboundMessage) -> AMQPOutboundMessage {
    AMQPOutboundMessage(
        exchange: inboundExchange,
        routingKey: "notification",
        body: message.body,
        properties: AMQPMessageProperties(
            contentType: "application/json",
            headers: message.properties.traceparent.map { ["traceparent": .string($0)] },
            deliveryMode: .persistent,
            correlationID: message.properties.correlationID,
            messageID: message.properties.messageID,
            timestamp: message.properties.timestamp.map { UInt64($0) },
            type: message.properties.type),
        mandatory: true)
}

/// Publishes in order on one channel, in confirmed batches: order matters for the setup phase (installs first).
func publishAll(_ messages: [InboundMessage], on channel: AMQPChannel, batch: Int) async throws {
    var start = 0
    while start < messages.count {
        let slice = messages[start..<min(start + batch, messages.count)].map(outbound)
        let outcomes = try await channel.publish(slice, confirmTimeout: .seconds(60))
        if let bad = outcomes.first(where: { !$0.isConfirmed }) {
            fail("a notification was not taken by the broker: \(bad) (is the topology declared? wallet-worker declare)")
        }
        start += batch
    }
}

func preload(messages count: Int, batch: Int, setup: Bool) async throws {
    let workload = Workload(count: count)
    let connection = try await connect("worker-load preload")
    let channel = try await connection.openChannel()
    try await channel.enableConfirms()
    let started = monotonicSeconds()
    if setup { try await publishAll(workload.setup, on: channel, batch: batch) }
    try await publishAll(workload.messages, on: channel, batch: batch)
    let elapsed = monotonicSeconds() - started
    let total = (setup ? workload.setup.count : 0) + workload.messages.count
    let ready = try await channel.queueStatus(workQueue).messageCount
    print(
        "preloaded \(setup ? workload.setup.count : 0) setup + \(workload.messages.count) notifications in "
            + String(format: "%.1f s (%.0f/s)", elapsed, Double(total) / elapsed) + "; '\(workQueue)' holds \(ready)")
    await connection.close()
}

// MARK: - result-size

func resultSize(messages count: Int) throws {
    let workload = Workload(count: count)
    let router = NotificationRouter()
    let now = Date(timeIntervalSince1970: 1_795_248_000)
    var state = InMemoryWalletState()
    for message in workload.setup {
        state.apply(try router.route(message, state: state, now: now).effects)
    }
    var results = 0
    var bytes = 0
    var deadLetters = 0
    var silent = 0
    for message in workload.messages {
        let decision = try router.route(message, state: state, now: now)
        state.apply(decision.effects)
        results += decision.results.count
        bytes += decision.results.reduce(0) { $0 + $1.body.count }
        if case .deadLetter = decision.disposition { deadLetters += 1 } else if decision.results.isEmpty { silent += 1 }
    }
    // Machine-readable first line: mean result body bytes.
    print(results > 0 ? bytes / results : 0)
    print(
        String(
            format: "results per notification %.3f, mean result body %d bytes, dead-lettered %d, no result %d",
            Double(results) / Double(count), results > 0 ? bytes / results : 0, deadLetters, silent))
}

// MARK: - watch

/// utime + stime of a process (all its threads), in seconds.
func cpuSeconds(pid: Int32) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds of a server process and its children: its own utime + stime, its reaped children's (cutime +
/// cstime: backends that exited), and the live children's utime + stime. Continuous across a child's exit.
func serverCPUSeconds(pid: Int32) -> Double? {
    func fields(_ pid: Int32) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    // After "(comm)": field 4 (index 1) is the parent pid; utime, stime, cutime, cstime are fields 14-17.
    guard let own = fields(pid), own.count > 15,
        let user = Double(own[11]), let system = Double(own[12]),
        let childUser = Double(own[13]), let childSystem = Double(own[14])
    else { return nil }
    var total = user + system + childUser + childSystem
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries {
        guard let child = Int32(entry), child != pid, let stat = fields(child), stat.count > 13,
            Int32(stat[1]) == pid, let childUser = Double(stat[11]), let childSystem = Double(stat[12])
        else { continue }
        total += childUser + childSystem
    }
    return total / ticks
}

/// The I/O counters of a process (all its threads) from /proc/PID/io: system calls and bytes, read and written,
/// through any file descriptor (sockets and files alike; the page cache, not the disk).
struct IOCounters {
    var readCalls = 0.0, readBytes = 0.0, writeCalls = 0.0, writeBytes = 0.0

    init() {}

    init?(pid: Int32) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":")
            guard parts.count == 2, let value = Double(parts[1].trimmingCharacters(in: .whitespaces)) else { continue }
            switch parts[0] {
            case "syscr": readCalls = value
            case "rchar": readBytes = value
            case "syscw": writeCalls = value
            case "wchar": writeBytes = value
            default: break
            }
        }
    }

    static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.readCalls += b.readCalls
        sum.readBytes += b.readBytes
        sum.writeCalls += b.writeCalls
        sum.writeBytes += b.writeBytes
        return sum
    }

    static func - (a: Self, b: Self) -> Self {
        var difference = a
        difference.readCalls -= b.readCalls
        difference.readBytes -= b.readBytes
        difference.writeCalls -= b.writeCalls
        difference.writeBytes -= b.writeBytes
        return difference
    }
}

/// The heap allocations of a process so far, as Benchmarks/alloc-count/alloc_count_preload.c counts them in
/// BENCH_ALLOC_COUNT_DIR/<pid>; nil when the directory is not set or the process was not started with the preload.
func allocationCount(pid: Int32) -> Double? {
    guard let directory = environment["BENCH_ALLOC_COUNT_DIR"], !directory.isEmpty,
        let handle = FileHandle(forReadingAtPath: "\(directory)/\(pid)")
    else { return nil }
    defer { try? handle.close() }
    guard let data = try? handle.read(upToCount: 8), data.count == 8 else { return nil }
    return Double(data.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
}

func statusKiB(pid: Int32, field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

func watch(
    pids: [Int32], serverPID: Int32?, brokerPID: Int32?, measured: Int, timeout: Double, interval: Double
) async throws {
    let connection = try await connect("worker-load watch")
    let channel = try await connection.openChannel()
    let deadline = monotonicSeconds() + timeout
    var start:
        (
            time: Double, cpu: Double, server: Double, broker: Double, io: IOCounters, allocations: Double?,
            ready: UInt32
        )?
    while true {
        let ready = try await channel.queueStatus(workQueue).messageCount
        let now = monotonicSeconds()
        var cpu = 0.0
        for pid in pids {
            guard let seconds = cpuSeconds(pid: pid) else { fail("process \(pid) ended before the queue was drained") }
            cpu += seconds
        }
        let server = serverPID.flatMap { serverCPUSeconds(pid: $0) } ?? 0
        let broker = brokerPID.flatMap { cpuSeconds(pid: $0) } ?? 0
        let io = pids.reduce(IOCounters()) { $0 + (IOCounters(pid: $1) ?? IOCounters()) }
        let counts = pids.map(allocationCount(pid:))
        let allocations = counts.contains(nil) ? nil : counts.reduce(0) { $0 + $1! }
        if start == nil, ready <= measured {
            start = (now, cpu, server, broker, io, allocations, ready)
        }
        if let start, ready == 0 {
            let window = now - start.time
            let hwm = pids.reduce(0) { $0 + (statusKiB(pid: $1, field: "VmHWM") ?? 0) }
            // Machine-readable: window seconds, messages taken in the window, CPU seconds in it, peak RSS KiB, and
            // the server's and the broker's CPU seconds in it (0 without --server-pid, --broker-pid), and the
            // processes' read and write system calls and bytes in it, and their heap allocations in it (-1 when not
            // counted).
            let moved = io - start.io
            var allocated = -1.0
            if let before = start.allocations, let after = allocations { allocated = after - before }
            print(
                String(
                    format: "window_s=%.3f messages=%d cpu_s=%.2f peak_kib=%d server_cpu_s=%.2f broker_cpu_s=%.2f "
                        + "read_calls=%.0f read_bytes=%.0f write_calls=%.0f write_bytes=%.0f allocations=%.0f",
                    window, Int(start.ready), cpu - start.cpu, hwm, server - start.server, broker - start.broker,
                    moved.readCalls, moved.readBytes, moved.writeCalls, moved.writeBytes, allocated))
            break
        }
        if now > deadline { fail("the queue still holds \(ready) after \(Int(timeout)) s") }
        try await Task.sleep(for: .seconds(interval))
    }
    await connection.close()
}

// MARK: - main

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "prepare":
        try await prepare()
    case "preload":
        try await preload(
            messages: option("--messages", in: arguments).flatMap(Int.init) ?? 100_000,
            batch: option("--batch", in: arguments).flatMap(Int.init) ?? 500,
            setup: !arguments.contains("--no-setup"))
    case "result-size":
        try resultSize(messages: option("--messages", in: arguments).flatMap(Int.init) ?? 100_000)
    case "watch":
        guard let pids = option("--pid", in: arguments)?.split(separator: ",").map({ Int32($0) }),
            !pids.isEmpty, !pids.contains(nil),
            let measured = option("--measured", in: arguments).flatMap(Int.init)
        else {
            fail("watch needs --pid PID[,PID...] --measured N")
        }
        try await watch(
            pids: pids.compactMap { $0 }, serverPID: option("--server-pid", in: arguments).flatMap(Int32.init),
            brokerPID: option("--broker-pid", in: arguments).flatMap(Int32.init),
            measured: measured,
            timeout: option("--timeout", in: arguments).flatMap(Double.init) ?? 900,
            interval: option("--interval", in: arguments).flatMap(Double.init) ?? 0.02)
    default:
        fail(
            "usage: worker-load prepare | preload [--messages N] [--batch N] [--no-setup] | result-size [--messages N] | watch --pid PID[,PID...] --measured N [--server-pid PID] [--broker-pid PID] [--timeout S] [--interval S]"
        )
    }
} catch {
    fail("\(error)")
}

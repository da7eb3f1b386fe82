import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

/// Another process holding the SQLite file's write lock: the `sqlite3` CLI in a transaction opened with
/// `BEGIN EXCLUSIVE`, kept open until `release()`.
final class SQLiteLockHolder {
    let process: ChildProcess

    /// The `sqlite3` CLI (scripts/lib/prerequisites.sh installs it), found on PATH.
    static var sqlite3: String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/sqlite3"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "/usr/bin/sqlite3"
    }

    init(path: String) async throws {
        process = try ChildProcess(
            executable: Self.sqlite3, arguments: ["-batch", path], label: "sqlite3-lock", pipeStandardInput: true)
        try process.write(toStandardInput: "BEGIN EXCLUSIVE;\nSELECT 'lock' || 'ed';\n")
        guard await process.waitForOutput(timeout: .seconds(30), { $0.contains("locked") }) != nil else {
            let tail = process.logTail()
            process.kill()
            throw ChildProcessError("sqlite3 could not take the exclusive lock\n\(tail)")
        }
    }

    /// Ends the transaction and the process (the lock is released either way).
    func release() async {
        try? process.write(toStandardInput: "ROLLBACK;\n.quit\n")
        process.closeStandardInput()
        if await process.waitForExit(timeout: .seconds(5)) == nil { process.kill() }
    }

    deinit {
        process.kill()
        process.removeLog()
    }
}

extension Resilience {
    /// CONTRACT.md §8: a transient failure is retried through the retry queue with a delay, and dead-lettered with the
    /// last error in a header after the last attempt. A store that cannot take writes is not such a failure of the
    /// messages: the worker holds them until it can (issue 23, defect 3).
    @Suite("Transient failure and store lock", .timeLimit(.minutes(3)))
    struct StoreLock {
        static let messages = 5

        /// A worker on a fresh SQLite file, consuming (so the file and its schema exist), and its ops port.
        private func startWorker(
            _ topology: ResilienceTopology, database: String, retryDelay: String, label: String
        ) async throws -> (WorkerProcess, Int) {
            try await startReadyWorker(
                workerRunArguments(
                    topology, store: "sqlite:\(database)", prefetch: 50, retryDelay: retryDelay,
                    extra: ["--store-busy-timeout", "100ms", "--retry-attempts", "3"]),
                label: label)
        }

        private func batch(_ prefix: String) -> [InboundSpec] {
            (0..<Self.messages).map {
                .cps("\(prefix)-\($0)", card: "\(prefix.uppercased())-\($0)", code: "CBP.info.tokenProvisioned")
            }
        }

        /// Issue 23, defect 3, as an operator met it: another process held `BEGIN EXCLUSIVE` on the SQLite file for
        /// minutes; `/readyz` stayed 200, `wallet_store_available` 1, and every notification sent meanwhile was
        /// dead-lettered ("gave up after 5 attempts: ... database is locked"), the store check being a read that
        /// passed. Now the check is a write that rolls back, and a locked file is an outage by itself.
        @Test(
            "while another process holds the store's write lock, the worker holds its messages, is not ready, reports the store unavailable at once and dead-letters nothing; released, every message is processed"
        )
        func lockedStoreHoldsTheMessages() async throws {
            let database = temporarySQLitePath("lock")
            defer { removeSQLite(database) }
            try await withResilienceTopology("lock", retryDelay: "200ms") { topology, connection, channel in
                let (worker, port) = try await startWorker(
                    topology, database: database, retryDelay: "200ms", label: "lock-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                let lock = try await SQLiteLockHolder(path: database)
                let locked = batch("locked")
                let published = ContinuousClock.now
                try await publishConfirmed(locked.map { $0.outbound(to: topology.inbound) }, on: channel)
                do {
                    try await waitUntil(
                        "the worker to notice the locked store\n\(worker.logTail())", every: .milliseconds(50)
                    ) {
                        try worker.metric(port: port, "wallet_store_available") == 0
                    }
                } catch {
                    await lock.release()
                    throw error
                }
                let noticed = ContinuousClock.now - published
                #expect(noticed < .seconds(5), "one batch's busy timeout, not minutes: \(noticed)")
                #expect(worker.log.contains("the store does not answer"), "logged when it began\n\(worker.logTail())")
                #expect(try httpGet(port: port, path: "/readyz").status == 503)
                // Long enough for the old worker's three attempts and its retries through the queue (200 and 400 ms),
                // waited by the worker's own probes, not by a guessed time: three failed (the locked batch began the
                // outage; each probe waits at least 250, 500, then 1,000 ms).
                try await waitUntil("three failed store checks\n\(worker.logTail())", every: .milliseconds(50)) {
                    try worker.metric(port: port, "wallet_store_checks_total", labels: [#"outcome="failed""#]) >= 3
                }
                #expect(
                    try await readyCount(topology.deadLetterQueue, on: connection) == 0, "dead-lettered while waiting")
                #expect(try worker.metric(port: port, "wallet_retries_total") == 0)
                #expect(try await readyCount(topology.capture, on: connection) == 0)
                #expect(try worker.metric(port: port, "wallet_store_available") == 0, "still out")

                await lock.release()
                try await waitUntil(
                    "readyCount(topology.capture) >= 2 * Self.messages\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.capture, on: connection) >= 2 * Self.messages
                }
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let accounting = ResultAccounting(results: results, inbound: locked)
                #expect(accounting.incomplete.isEmpty && accounting.unexpected.isEmpty)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                #expect(try worker.metric(port: port, "wallet_store_available") == 1)
                #expect(try worker.metric(port: port, "wallet_store_outages_total") == 1)
                #expect(worker.isRunning)
            }
        }
    }
}

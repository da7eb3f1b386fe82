import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// The operations endpoint of a running worker under a client that pipelines requests and never reads: the
    /// worker's own memory, measured from outside (the endpoint's other limits: `OperationsServerLimitsTests`).
    @Suite("Operations endpoint under a client that never reads", .timeLimit(.minutes(2)))
    struct OperationsBackpressure {
        @Test(
            "20,000 pipelined GET /metrics never read: the worker's memory stays bounded, /healthz and /readyz answer")
        func pipelinedMetricsWithoutReading() async throws {
            let database = temporarySQLitePath("ops-pipelined")
            defer { removeSQLite(database) }
            try await withResilienceTopology("ops-pipelined") { topology, _, _ in
                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: "sqlite:\(database)"), amqpURL: TestBroker.urlText,
                    label: "ops-pipelined-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                let requests = 20_000
                let responseSize = try httpGet(port: port, path: "/metrics").body.utf8.count
                // Held all at once, the responses would be far above the bound checked.
                try #require(responseSize * requests > 100 * 1_048_576, "a /metrics response is \(responseSize) bytes")

                let before = try residentBytes(of: worker.pid)
                let greedy = try RawHTTPConnection(port: port, sendTimeout: .seconds(1))
                let request = Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
                // Sends until done or until the kernel's buffers are full (the worker stopped reading).
                _ = await greedy.send(Array(repeating: request, count: requests).flatMap { $0 })

                // Answered while the greedy connection is still open (its idle deadline is 10 s): causal, not timed.
                let clock = ContinuousClock()
                let probeStart = clock.now
                #expect(try httpGet(port: port, path: "/healthz").status == 200)
                #expect(
                    !(await greedy.waitForHangUp(timeout: .milliseconds(1))),
                    "/healthz was answered only after the greedy connection was closed (\(clock.now - probeStart))")

                // Long enough for a worker without backpressure to answer everything it read into memory.
                var peak = before
                for _ in 0..<30 {
                    try await Task.sleep(for: .milliseconds(100))
                    peak = max(peak, try residentBytes(of: worker.pid))
                }
                #expect(
                    peak - before < 50 * 1_048_576,
                    "the worker's resident memory grew by \((peak - before) / 1_048_576) MiB\n\(worker.logTail())")
                #expect(try httpGet(port: port, path: "/readyz").status == 200)

                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(0), "\(worker.logTail())")
                greedy.close()
            }
        }
    }
}

/// The resident set size of a process, from /proc/PID/statm.
private func residentBytes(of pid: pid_t) throws -> Int {
    let statm = try String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8).split(separator: " ")
    guard statm.count > 1, let pages = Int(statm[1]) else {
        throw ChildProcessError("unreadable /proc/\(pid)/statm")
    }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

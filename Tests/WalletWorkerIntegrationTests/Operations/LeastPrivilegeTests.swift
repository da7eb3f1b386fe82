import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 15, part 5: the worker runs as a broker user without `configure` rights (`--no-declare`; a deploy
    /// job declares with another user), says what to do when such a user is not told so, and reads its secrets
    /// from files (`AMQP_URL_FILE`, the `_FILE` convention of official images).
    @Suite(
        "Least privilege and secrets from files", .timeLimit(.minutes(2)),
        .enabled(
            if: ProcessInfo.processInfo.environment["AMQP_RUNTIME_USER_URL"] != nil,
            "needs AMQP_RUNTIME_USER_URL: a user with no configure permission (scripts/test.sh creates one)"))
    struct LeastPrivilege {
        static var runtimeURL: String { ProcessInfo.processInfo.environment["AMQP_RUNTIME_USER_URL"] ?? "" }

        @Test(
            "a user without configure rights processes with --no-declare, and without it the worker stops naming --no-declare"
        )
        func runtimeUserWithoutConfigureRights() async throws {
            try await withResilienceTopology("least-privilege") { topology, connection, channel in
                let inbound = (0..<20).map { InboundSpec.action("lp-\($0)", action: "lp.refresh") }
                try await channel.enableConfirms()

                // Not told: the broker's 403 on the first declaration stops it with the way out.
                let refused = try WorkerProcess(
                    workerRunArguments(topology, store: "memory"), amqpURL: Self.runtimeURL, label: "lp-refused")
                defer {
                    refused.kill()
                    refused.process.removeLog()
                }
                let ended = await refused.waitForExit(timeout: .seconds(30))
                #expect(ended?.exit == .exited(1), "\(refused.logTail())")
                #expect(
                    refused.log.contains("--no-declare") && refused.log.contains("ACCESS_REFUSED"),
                    "\(refused.logTail())")

                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: "memory", extra: ["--no-declare"]), amqpURL: Self.runtimeURL,
                    label: "lp-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil(
                    "readyCount(topology.capture) >= inbound.count\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.capture, on: connection) >= inbound.count
                }
                let accounting = ResultAccounting(
                    results: try await MessageCapture.drain(topology.capture, on: connection), inbound: inbound)
                #expect(accounting.incomplete.isEmpty && accounting.unexpected.isEmpty)
                #expect(!worker.log.contains("ACCESS_REFUSED"), "\(worker.logTail())")
            }
        }

        @Test(
            "AMQP_URL_FILE: the URL is read from the file (trailing newline dropped); a missing file is named, its content never printed"
        )
        func secretsFromFiles() async throws {
            let path = ChildProcess.temporaryPath("amqp-url")
            try (TestBroker.urlText + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: path) }
            let topology = ResilienceTopology("url-file")
            defer { Task { await topology.delete() } }

            let declare = try WorkerProcess(
                ["declare"] + topology.flags, amqpURL: "", label: "url-file",
                environment: ["AMQP_URL_FILE": path])
            defer {
                declare.kill()
                declare.process.removeLog()
            }
            let declared = await declare.waitForExit(timeout: .seconds(30))
            #expect(declared?.exit == .exited(0), "\(declare.logTail())")

            let missing = try WorkerProcess(
                ["declare"] + topology.flags, amqpURL: "", label: "url-file-missing",
                environment: ["AMQP_URL_FILE": path + ".missing"])
            defer {
                missing.kill()
                missing.process.removeLog()
            }
            let failed = await missing.waitForExit(timeout: .seconds(30))
            #expect(failed?.exit != .exited(0))
            #expect(missing.log.contains("AMQP_URL_FILE") && missing.log.contains(".missing"), "\(missing.logTail())")
        }
    }
}

import AMQPTransport
import BrokerTestSupport
import Foundation
import Logging
import PostgresNIO
import PostgresTestSupport
import TestSupport
import Testing
import WalletStore

#if canImport(Glibc)
    import Glibc
#endif

extension Resilience {
    /// Issue 25, "what operators see": secrets never reach a log, a refused login stops the worker at start, dropped
    /// spans are counted and the exporter's shutdown is bounded, dead letters keep their routing key through the
    /// retry levels and replay uses it, and the smaller things an operator reads (messages, exit statuses).
    @Suite("What operators see", .timeLimit(.minutes(5)))
    struct OperatorsViewTests {
        // MARK: - Secrets

        @Test(
            "a worker started with a collector token, a broker password and a PostgreSQL password, as variables and as _FILE, writes none of them at --log-level trace, nor when the store refuses its login"
        )
        func secretsNeverReachTheLog() async throws {
            guard let brokerURL = ProcessInfo.processInfo.environment["AMQP_SECOND_USER_URL"], !brokerURL.isEmpty,
                ReplicaDatabase.isConfigured
            else {
                Issue.record("needs AMQP_SECOND_USER_URL and POSTGRES_URL (scripts/test.sh sets both)")
                return
            }
            let brokerPassword = try AMQPURL(parsing: brokerURL).password
            let token = "tok-\(UUID().uuidString.lowercased())"
            let apiKey = "key-\(UUID().uuidString.lowercased())"
            let receiver = try OTLPReceiver()
            defer { receiver.close() }

            let role = "wnw_secret_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
            let password = "pg-\(UUID().uuidString.lowercased())"
            try await adminQuery("CREATE ROLE \(role) LOGIN PASSWORD '\(password)'")
            let outcome: Result<Void, any Error>
            do {
                outcome = .success(
                    try await ReplicaDatabase.with("secrets") { database in
                        try await database.withConnection { connection in
                            try await connection.query(
                                PostgresQuery(unsafeSQL: "GRANT ALL ON SCHEMA public TO \(role)"),
                                logger: ReplicaDatabase.logger)
                        }
                        try await adminQuery("GRANT ALL ON DATABASE \(database.name) TO \(role)")
                        var store = URLComponents(string: database.storeURL)!
                        store.user = role
                        store.password = password
                        let storeURL = store.string!
                        let secrets = [
                            brokerPassword, password, token, apiKey, "Bearer \(token)",
                            password.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
                        ]

                        try await withResilienceTopology("secrets", url: brokerURL) { topology, connection, channel in
                            let otel = [
                                "OTEL_TRACES_EXPORTER": "otlp",
                                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                                "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer \(token),x-api-key=\(apiKey)",
                                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                            ]
                            let arguments =
                                [
                                    "run", "--http-port", "0", "--http-host", "127.0.0.1", "--log-level", "trace",
                                    "--retry-delay", "200ms",
                                ] + topology.flags
                            let directory = FileManager.default.temporaryDirectory
                                .appendingPathComponent("wnw-secrets-\(UUID().uuidString.prefix(8))")
                            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                            defer { try? FileManager.default.removeItem(at: directory) }
                            let urlFile = directory.appendingPathComponent("amqp-url").path
                            let storeFile = directory.appendingPathComponent("store").path
                            try (brokerURL + "\n").write(toFile: urlFile, atomically: true, encoding: .utf8)
                            try (storeURL + "\n").write(toFile: storeFile, atomically: true, encoding: .utf8)
                            try await channel.enableConfirms()

                            // The values in the variables, JSON logs; then in files, text logs.
                            let starts:
                                [(label: String, amqpURL: String, environment: [String: String], format: String)] = [
                                    ("variables", brokerURL, ["WALLET_STORE": storeURL], "json"),
                                    ("files", "", ["AMQP_URL_FILE": urlFile, "WALLET_STORE_FILE": storeFile], "text"),
                                ]
                            for (index, start) in starts.enumerated() {
                                let worker = try WorkerProcess(
                                    arguments + ["--log-format", start.format], amqpURL: start.amqpURL,
                                    label: "secrets-\(start.label)", environment: start.environment.merging(otel) { $1 }
                                )
                                defer {
                                    worker.kill()
                                    worker.process.removeLog()
                                }
                                let port = try await worker.operationsPort()
                                try await worker.waitForHTTP(
                                    port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                                var bad = InboundSpec.action("secrets-bad-\(index)", action: "x")
                                bad.text = "not json"
                                try await publishConfirmed(
                                    [
                                        InboundSpec.cps(
                                            "secrets-\(index)", card: "SECRETS-\(index)",
                                            code: "CBP.info.tokenProvisioned"
                                        )
                                        .outbound(to: topology.inbound),
                                        bad.outbound(to: topology.inbound),
                                    ], on: channel)
                                try await waitUntil(
                                    "readyCount(topology.capture) >= 3 * (index + 1)\n\(worker.logTail())"
                                ) {
                                    try await readyCount(topology.capture, on: connection) >= 3 * (index + 1)
                                }
                                worker.terminate()
                                let ended = await worker.waitForExit(timeout: .seconds(30))
                                #expect(ended?.exit == .exited(0), "\(worker.logTail())")
                                let log = worker.log
                                #expect(
                                    log.contains("tracing on"),
                                    "the worker traced (the test looks at a tracing worker's output)\n\(worker.logTail())"
                                )
                                for secret in secrets {
                                    // A Bool, not the log: a failure must not print the secret it found.
                                    let leaked = log.contains(secret)
                                    #expect(
                                        !leaked,
                                        "\(start.label): a secret is in the output:\n\(lines(of: log, containing: secret))"
                                    )
                                }
                            }
                            // The collector got the token: it was used, only never written.
                            #expect(
                                receiver.requests.contains { $0.headers["authorization"] == "Bearer \(token)" },
                                "the exporter did not send the configured header")

                            // The store refuses a wrong password: the error names the refusal, not the password.
                            let wrong = "pg-wrong-\(UUID().uuidString.lowercased())"
                            store.password = wrong
                            let refused = try WorkerProcess(
                                arguments + ["--log-format", "json"], amqpURL: brokerURL, label: "secrets-refused",
                                environment: ["WALLET_STORE": store.string!].merging(otel) { $1 })
                            defer {
                                refused.kill()
                                refused.process.removeLog()
                            }
                            let ended = await refused.waitForExit(timeout: .seconds(30))
                            #expect(ended?.exit == .exited(2), "\(refused.logTail())")
                            #expect(refused.log.contains("authentication failed"), "\(refused.logTail())")
                            for secret in secrets + [wrong] {
                                let leaked = refused.log.contains(secret)
                                #expect(!leaked, "\(lines(of: refused.log, containing: secret))")
                            }
                        }
                    })
            } catch {
                outcome = .failure(error)
            }
            // The database (and what the role owned in it) is gone: the role can go too.
            try? await adminQuery("DROP ROLE IF EXISTS \(role)")
            try outcome.get()
        }

        // MARK: - A refused login

        @Test(
            "a wrong password, or a vhost the user may not use, stops the worker within its first connection attempt with status 2, naming the refusal",
            arguments: ["password", "vhost"])
        func refusedLoginStopsTheWorker(_ what: String) async throws {
            var url = try AMQPURL(parsing: TestBroker.urlText)
            switch what {
            case "password": url.password = "wrong-\(UUID().uuidString.prefix(8))"
            default: url.virtualHost = "wnw-no-such-vhost-\(UUID().uuidString.prefix(8))"
            }
            let text =
                "amqp://\(url.user):\(url.password)@\(url.host):\(url.port)/"
                + (url.virtualHost.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? url.virtualHost)
            let topology = ResilienceTopology("refused-\(what)")
            let worker = try WorkerProcess(
                workerRunArguments(topology, store: "memory"), amqpURL: text, label: "refused-\(what)")
            defer {
                worker.kill()
                worker.process.removeLog()
            }
            // The connect timeout is 10 s: the refusal comes well within it.
            let ended = await worker.waitForExit(timeout: .seconds(60))
            let (exit, elapsed) = try #require(ended, "the worker kept retrying a refused login\n\(worker.logTail())")
            #expect(exit == .exited(2), "\(worker.logTail())")
            #expect(elapsed < .seconds(10))
            let refusal = what == "password" ? "ACCESS_REFUSED" : "NOT_ALLOWED"
            #expect(
                worker.log.contains("refused the first login") && worker.log.contains(refusal), "\(worker.logTail())")
            #expect(!worker.log.contains(url.password) || url.password == "guest", "\(worker.logTail())")
            #expect(
                worker.log.components(separatedBy: "refused the first login").count == 2,
                "the refusal is logged once, with its exit status: \(worker.logTail())")
            #expect(worker.log.contains("exit_status") && !worker.log.contains("logfile.."), "\(worker.logTail())")
        }

        @Test(
            "a password changed under a running worker is retried, counted in wallet_broker_login_refusals_total, and the worker consumes again once it is right"
        )
        func laterRefusalsAreRetriedAndCounted() async throws {
            let environment = ProcessInfo.processInfo.environment
            guard let port = environment["RABBITMQ_PORT"], let data = environment["RABBITMQ_DATA_DIR"], !data.isEmpty
            else {
                Issue.record(
                    "needs scripts/test.sh's own broker (RABBITMQ_PORT, RABBITMQ_DATA_DIR) to change a password")
                return
            }
            let broker = ["RABBITMQ_PORT": port, "RABBITMQ_DATA_DIR": data]
            func ctlOutput(_ arguments: String...) async throws -> String {
                try await runRepositoryScript(
                    "rabbitmq-local.sh", ["ctl"] + arguments, environment: broker, timeout: .seconds(60))
            }
            func ctl(_ arguments: String...) async throws {
                _ = try await runRepositoryScript(
                    "rabbitmq-local.sh", ["ctl"] + arguments, environment: broker, timeout: .seconds(60))
            }
            let user = "wnw-rotate-\(UUID().uuidString.prefix(8).lowercased())"
            try await ctl("add_user", user, "first-password")
            try await ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
            try await withTeardown({
                runRepositoryScriptBlocking("rabbitmq-local.sh", ["ctl", "delete_user", user], environment: broker)
            }) {
                var url = try AMQPURL(parsing: TestBroker.urlText)
                url.user = user
                url.password = "first-password"
                let text = "amqp://\(user):first-password@\(url.host):\(url.port)/%2f"
                try await withResilienceTopology("rotate") { topology, connection, channel in
                    let worker = try WorkerProcess(
                        workerRunArguments(topology, store: "memory"), amqpURL: text, label: "rotate-worker")
                    defer {
                        worker.kill()
                        worker.process.removeLog()
                    }
                    let ops = try await worker.operationsPort()
                    try await worker.waitForHTTP(port: ops, path: "/readyz", status: 200, timeout: .seconds(30))

                    try await ctl("change_password", user, "rotated-password")
                    // rabbitmqctl lists the user's connections, then closes each: when the worker ends its session
                    // as a whole on the first close, the next close finds no process and the command fails (status
                    // 69, `noproc`, or another wording of the same race). What decides is what is left: the step
                    // runs again until the broker lists none of the user's connections.
                    try await waitUntil("\(user)'s connections closed") {
                        _ = try? await ctl("close_all_user_connections", user, "password rotated")
                        let listed = try await ctlOutput("list_connections", "--quiet", "--no-table-headers", "user")
                        return !listed.split(separator: "\n").contains {
                            $0.trimmingCharacters(in: .whitespaces) == user
                        }
                    }
                    try await waitUntil(
                        "counted\n\(worker.logTail())", every: .milliseconds(250)
                    ) {
                        try worker.metric(port: ops, "wallet_broker_login_refusals_total") >= 1
                    }
                    #expect(
                        worker.isRunning,
                        "a refusal after the first login must not stop the worker\n\(worker.logTail())")
                    #expect(try httpGet(port: ops, path: "/readyz").status == 503)

                    try await ctl("change_password", user, "first-password")
                    try await worker.waitForHTTP(port: ops, path: "/readyz", status: 200, timeout: .seconds(60))
                    try await channel.enableConfirms()
                    try await publishConfirmed(
                        [InboundSpec.action("rotate-1", action: "rotate").outbound(to: topology.inbound)], on: channel)
                    try await waitUntil("readyCount(topology.capture) >= 1\n\(worker.logTail())") {
                        try await readyCount(topology.capture, on: connection) >= 1
                    }
                }
            }
        }

        // MARK: - Dropped spans

        @Test(
            "a collector that takes the connection and never answers: wallet_spans_dropped_total counts the spans lost, processing goes on, and SIGTERM ends within the exporter's shutdown limit"
        )
        func droppedSpansAreCounted() async throws {
            let receiver = try OTLPReceiver(answers: false)
            defer { receiver.close() }
            try await withResilienceTopology("spans-dropped") { topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: "memory"), amqpURL: TestBroker.urlText, label: "spans-dropped",
                    environment: [
                        "OTEL_TRACES_EXPORTER": "otlp",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)",
                        "OTEL_BSP_MAX_QUEUE_SIZE": "64", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "32",
                        "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_BSP_EXPORT_TIMEOUT": "1000",
                        "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
                    ])
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()
                let inbound = (0..<300).map { InboundSpec.action("spans-\($0)", action: "spans.dropped") }
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)

                try await waitUntil(
                    "the stalled collector held up processing\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.capture, on: connection) >= inbound.count
                }
                try await waitUntil(
                    "spans dropped for both reasons; wallet_spans_dropped_total: "
                        + "\((try? worker.metric(port: port, "wallet_spans_dropped_total")) ?? -1)\n\(worker.logTail())",
                    every: .milliseconds(250)
                ) {
                    try worker.metric(port: port, "wallet_spans_dropped_total", labels: [#"reason="queue_full""#]) > 0
                        && worker.metric(port: port, "wallet_spans_dropped_total", labels: [#"reason="export_failed""#])
                            > 0
                }
                #expect(!receiver.requests.isEmpty, "the exporter never reached the collector")

                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                let (exit, elapsed) = try #require(ended, "\(worker.logTail())")
                #expect(exit == .exited(0), "\(worker.logTail())")
                // Draining takes milliseconds here; the exporter gets at most its 3 s shutdown limit on top.
                #expect(elapsed < .seconds(8), "SIGTERM took \(elapsed)\n\(worker.logTail())")
            }
        }

        // MARK: - Dead letters keep their routing key

        @Test(
            "a message retried twice and then dead-lettered keeps its routing key and exchange; replayed, it reaches the work queue with its original routing key"
        )
        func deadLettersKeepTheirRoutingKeyThroughRetries() async throws {
            let database = temporarySQLitePath("original-key")
            defer { removeSQLite(database) }
            try await withResilienceTopology("original-key", retryDelay: "200ms") { topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(
                        topology, store: "sqlite:\(database)", prefetch: 50,
                        extra: ["--store-busy-timeout", "100ms", "--retry-attempts", "3"]),
                    amqpURL: TestBroker.urlText, label: "original-key-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()

                // Its results cannot be routed (the capture queue unbound): a transient failure of its own, retried
                // twice through the retry levels, then dead-lettered.
                try await topology.unbindCapture(on: channel)
                let message = InboundSpec.mg("original-key-1", card: "ORIGINAL-1")
                try await publishConfirmed(
                    [message.outbound(to: topology.inbound, routingKey: "notification")], on: channel)
                do {
                    try await waitUntil("the message dead-lettered\n\(worker.logTail())") {
                        try await readyCount(topology.deadLetterQueue, on: connection) >= 1
                    }
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }
                try await topology.bindCapture(on: channel)
                #expect(try worker.metric(port: port, "wallet_retries_total") == 2, "\(worker.logTail())")
                worker.kill()

                // The dead letter: the original routing key, and where it was first published in its headers.
                let letter = try #require(try await peek(topology.deadLetterQueue, on: connection))
                #expect(letter.routingKey == "notification", "the dead letter's routing key is \(letter.routingKey)")
                #expect(letter.properties.headers?["x-original-routing-key"] == .string("notification"))
                #expect(letter.properties.headers?["x-original-exchange"] == .string(topology.inbound))

                // Logged waits are numbers: the first level's TTL, then the copy's own expiration.
                let retryLines = jsonObjects(worker.log).filter {
                    $0["message"] as? String == "sent to the retry queue"
                }
                #expect(retryLines.count == 2, "\(worker.logTail())")
                #expect(
                    retryLines.allSatisfy { ($0["expiration_ms"] as? String).flatMap(Int.init) != nil }, "\(retryLines)"
                )

                // Replayed with the worker stopped: what reaches the work queue is what the backend sent.
                let replay = try await walletWorkerCommand(
                    ["dead-letters", "replay", "--message-id", message.id, "--json"] + topology.flags)
                #expect(replay.exit == .exited(0), "\(replay.output)")
                try await waitUntil("readyCount(topology.work) == 1\n\(replay.output)") {
                    try await readyCount(topology.work, on: connection) == 1
                }
                let replayed = try #require(try await peek(topology.work, on: connection))
                #expect(replayed.routingKey == "notification", "replayed with routing key \(replayed.routingKey)")
                #expect(replayed.exchange == topology.inbound)
                #expect(replayed.properties.headers?["x-original-routing-key"] == nil)
                #expect(replayed.properties.headers?["x-retry-count"] == nil)
                #expect(String(decoding: replayed.body, as: UTF8.self) == message.text)
            }
        }

        // MARK: - Smaller things an operator reads

        @Test(
            "a refused connection, an AMQP_URL_FILE naming a directory and a missing SQLite store say what is wrong, with the documented statuses"
        )
        func clearErrors() async throws {
            let closedPort = try closedLoopbackPort()
            let refused = try await walletWorkerCommand(
                ["declare", "--log-format", "text"],
                environment: ["AMQP_URL": "amqp://guest:guest@127.0.0.1:\(closedPort)/%2f"])
            #expect(refused.exit == .exited(2), "\(refused.output)")
            #expect(
                refused.output.contains("connection refused") && !refused.output.contains("a socket error occurred"),
                "\(refused.output)")

            let directory = FileManager.default.temporaryDirectory.path
            let fromDirectory = try await walletWorkerCommand(
                ["declare"], environment: ["AMQP_URL": "", "AMQP_URL_FILE": directory])
            #expect(fromDirectory.exit == .exited(64), "\(fromDirectory.output)")
            #expect(
                fromDirectory.output.contains("AMQP_URL_FILE") && fromDirectory.output.contains("is a directory")
                    && !fromDirectory.output.contains("NSCocoaErrorDomain"), "\(fromDirectory.output)")

            // A broker URL that does not parse is usage, said with its password redacted, not a failure to connect.
            let notAURL = try await walletWorkerCommand(["run", "--amqp-url", "http://wallet:s3cret-pw@broker/"])
            #expect(notAURL.exit == .exited(64), "\(notAURL.output)")
            #expect(
                notAURL.output.contains("amqp:// or amqps://") && !notAURL.output.contains("s3cret-pw"),
                "\(notAURL.output)")

            let missing = "/tmp/wnw-no-such-dir-\(UUID().uuidString.prefix(8))/wallet.sqlite"
            let route = try await walletWorkerCommand(
                ["route", "--store", "sqlite:\(missing)"], input: #"{"properties":{"messageId":"m"},"body":{}}"# + "\n")
            #expect(route.exit == .exited(2), "\(route.output)")
            #expect(
                route.output.contains(missing) && route.output.contains("wallet-worker migrate --store")
                    && !route.output.contains("--no-migrate"), "\(route.output)")
            let inspect = try await walletWorkerCommand(["inspect", "card", "DC-1", "--store", "sqlite:\(missing)"])
            #expect(inspect.exit == .exited(2), "\(inspect.output)")

            let notify = try await runExecutable("wallet-notify", ["--help"])
            #expect(notify.exit == .exited(0), "\(notify.output)")
            #expect(
                notify.output.contains("USAGE") && notify.output.contains("AMQP_URL")
                    && notify.output.contains("Exit status"), "\(notify.output)")
        }
    }
}

/// The lines of `log` that contain `secret`, with the secret masked (for a failure message that is safe to print).
private func lines(of log: String, containing secret: String) -> String {
    log.split(separator: "\n").filter { $0.contains(secret) }.prefix(5)
        .map { $0.replacingOccurrences(of: secret, with: "<SECRET>") }.joined(separator: "\n")
}

/// The first message of `queue`, taken and put back (the channel closes without acknowledging it); nil when none
/// arrives within 5 s.
func peek(_ queue: String, on connection: AMQPConnection) async throws -> AMQPDelivery? {
    let channel = try await connection.openChannel()
    try await channel.setPrefetch(count: 1)
    let consumer = try await channel.consume(queue: queue)
    // Closing the channel ends the consumer's sequence (its calls do not react to task cancellation).
    let deadline = Task {
        try await Task.sleep(for: .seconds(5))
        try? await channel.close()
    }
    var first: AMQPDelivery?
    do {
        for try await batch in consumer {
            if let delivery = batch.first {
                first = delivery
                break
            }
        }
    } catch {}
    deadline.cancel()
    try? await channel.close()
    return first
}

/// A loopback port nothing listens on: bound, then closed.
func closedLoopbackPort() throws -> Int {
    let (listener, port) = try listenOnLoopback()
    close(listener)
    return port
}

/// A statement on `POSTGRES_URL`'s own database, as its (super)user.
func adminQuery(_ sql: String) async throws {
    guard let url = PostgresTestServer.url else { throw ChildProcessError("POSTGRES_URL is not set") }
    let server = try PostgresLocation(parsing: url)
    let connection = try await PostgresConnection.connect(
        configuration: PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.user, password: server.password,
            database: server.database, tls: .disable),
        id: 1, logger: ReplicaDatabase.logger)
    do {
        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: ReplicaDatabase.logger)
    } catch {
        try? await connection.close()
        throw error
    }
    try await connection.close()
}

/// An executable built beside `wallet-worker` (e.g. `wallet-notify`), run to its end with `arguments`.
func runExecutable(_ name: String, _ arguments: [String], environment: [String: String] = [:]) async throws
    -> (exit: ChildExit, output: String)
{
    let worker = URL(fileURLWithPath: try WorkerProcess.executablePath)
    let path = worker.deletingLastPathComponent().appendingPathComponent(name).path
    let process = try ChildProcess(executable: path, arguments: arguments, environment: environment, label: name)
    defer {
        process.kill()
        process.removeLog()
    }
    guard let (exit, _) = await process.waitForExit(timeout: .seconds(60)) else {
        throw ChildProcessError("\(name) \(arguments) did not finish\n\(process.logTail())")
    }
    return (exit, process.log)
}

import AMQPTransport
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing
import WalletRouting
import WalletStore

@testable import WalletWorker

/// Issue 25, the parts without a broker: secret redaction, swift-otel's diagnostics, the new metrics, the process
/// metrics and the exit statuses.
@Suite struct OperatorsViewUnitTests {
    // MARK: - Secrets

    @Test func theSecretsOfAConfigurationAreMaskedWhateverLogsThem() throws {
        var configuration = WorkerConfiguration()
        configuration.amqpURL = "amqp://worker:s3cr%40t-broker-pass@rabbit:5672/%2f"
        configuration.store = try StoreLocation(parsing: "postgres://wallet:pg-password-123@db/wallet")
        let secrets = SecretRedaction.of(
            configuration,
            environment: [
                "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer tok-0123456789,x-api-key=key%3Dabcdefgh",
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-other=other-secret-value",
                "OTEL_SERVICE_NAME": "wallet-worker-eu",
            ])
        let line =
            "env authorization=Bearer tok-0123456789 key=abcdefgh other-secret-value s3cr@t-broker-pass "
            + "s3cr%40t-broker-pass pg-password-123 wallet-worker-eu"
        let redacted = secrets.redact(line)
        for secret in [
            "tok-0123456789", "key=abcdefgh", "other-secret-value", "s3cr@t-broker-pass", "s3cr%40t-broker-pass",
            "pg-password-123",
        ] {
            #expect(!redacted.contains(secret), "\(secret) in \(redacted)")
        }
        #expect(redacted.contains("wallet-worker-eu"), "not a secret: \(redacted)")
        // A short password is not masked everywhere it happens to appear (it would mask user and queue names).
        configuration.amqpURL = "amqp://guest:guest@localhost/%2f"
        #expect(SecretRedaction.of(configuration, environment: [:]).redact("guest:guest") == "guest:guest")
    }

    @Test(arguments: [
        ("amqp://worker:pw@rabbit:5672/%2f", "amqp://worker:***@rabbit:5672/%2f"),
        ("x=https://otel:s3@collector/v1 y", "x=https://otel:***@collector/v1 y"),
        ("a postgres://u:p%40ss@db?sslmode=require b", "a postgres://u:***@db?sslmode=require b"),
        ("two: amqp://a:1@h amqp://b:2@k/", "two: amqp://a:***@h amqp://b:***@k/"),
        ("already amqp://a:***@h", "already amqp://a:***@h"),
        ("no password amqp://user@h/ or http://h:8080/x@y", "no password amqp://user@h/ or http://h:8080/x@y"),
        ("no URL user:pw@host", "no URL user:pw@host"),
    ])
    func aURLsPasswordIsMaskedWhateverItsLength(line: String, masked: String) {
        #expect(SecretRedaction.maskingURLPasswords(in: line) == masked)
        #expect(SecretRedaction.none.redact(line) == masked)
    }

    @Test func theCollectorEndpointsPasswordIsASecret() {
        let secrets = SecretRedaction.of(
            WorkerConfiguration(),
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "https://otel:endpoint-password-1@collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel:traces-password-2@collector:4318/v1/traces",
                "OTEL_SERVICE_NAME": "not-a-secret-name",
            ])
        // Written elsewhere than in a URL (swift-otel's `environment_value`, an error's text): masked too.
        let redacted = secrets.redact("endpoint-password-1 traces-password-2 not-a-secret-name")
        #expect(redacted == "*** *** not-a-secret-name")
    }

    @Test func theHandlerMasksURLPasswordsWithoutAnyConfiguredSecret() {
        let captured = CapturedLog()
        var logger = Logger(label: "test") { _ in
            RedactingLogHandler(CapturedLog.Handler(captured), secrets: .none)
        }
        logger.logLevel = .info
        logger.info("connecting to amqp://guest:guest@localhost/", metadata: ["url": "postgres://u:pw@db/wallet"])
        let line = captured.texts.joined()
        #expect(!line.contains(":guest@") && !line.contains(":pw@"), "\(line)")
        #expect(line.contains("amqp://guest:***@localhost/") && line.contains("postgres://u:***@db/wallet"))
    }

    @Test func theRedactingHandlerMasksMessagesMetadataAndErrors() {
        let captured = CapturedLog()
        let secrets = SecretRedaction(["very-secret-token"])
        var logger = Logger(label: "test") { _ in
            RedactingLogHandler(CapturedLog.Handler(captured), secrets: secrets)
        }
        logger.logLevel = .trace
        logger[metadataKey: "header"] = "Bearer very-secret-token"
        logger.info(
            "sending very-secret-token",
            metadata: ["nested": ["value": "x very-secret-token"], "list": ["very-secret-token"]])
        let lines = captured.texts
        #expect(lines.count == 1)
        #expect(!lines.joined().contains("very-secret-token"), "\(lines)")
        #expect(lines.joined().contains("***"))
    }

    // MARK: - Metrics

    @Test func theLastProcessedTimestampMovesOnlyForProcessedMessages() throws {
        let metrics = WorkerMetrics()
        let start = try value(metrics, "wallet_last_processed_timestamp_seconds")
        #expect(abs(start - Date().timeIntervalSince1970) < 5, "the start until the first message")
        metrics.lastProcessed.set(1_000.0)
        let observer = LifecycleObserver(
            metrics: metrics, health: WorkerHealth(pipelines: 1),
            logger: Logger(label: "t", factory: { _ in SwiftLogNoOpLogHandler() }), tracing: nil,
            stopTally: StopTally(),
            storms: WarningStorms(clock: .continuous))
        let delivery = DeliveryLifecycle.Delivery(
            tag: 1, original: OriginalMessage(body: [], properties: AMQPMessageProperties(), routingKey: "k"),
            redelivered: false, receivedAt: .zero)
        let stored = StoredDecision(
            decision: Decision(
                effects: [], results: [], disposition: .acknowledge, outcome: .ignored, sender: nil,
                digitalCardId: nil),
            isReplay: false)
        func ended(_ fate: DeliveryFate, _ stored: StoredDecision?) -> LifecycleEvent {
            .ended([
                DeliveryEnd(
                    session: DeliveryLifecycle.SessionID(pipeline: 0, number: 1), delivery: delivery, fate: fate,
                    stored: stored, skippedReplyCopies: 0, elapsed: .zero)
            ])
        }
        observer.observe(ended(.retried(attempt: 1, error: "x"), nil))
        #expect(try value(metrics, "wallet_last_processed_timestamp_seconds") == 1_000, "a retry is not progress")
        observer.observe(ended(.requeued(reason: "x"), stored))
        #expect(
            try value(metrics, "wallet_last_processed_timestamp_seconds") == 1_000,
            "a requeued delivery is not progress")
        observer.observe(ended(.processed, stored))
        #expect(abs(try value(metrics, "wallet_last_processed_timestamp_seconds") - Date().timeIntervalSince1970) < 5)
        // This message has no AMQP timestamp: counted, and no lag recorded (the retry and the requeue left the queue
        // only once: the processed end, and the retry's).
        #expect(try value(metrics, "wallet_messages_without_timestamp_total") == 2)
        #expect(try value(metrics, "wallet_processing_lag_seconds_count") == 0)
    }

    @Test func inFlightDeliveriesAreSummedOverTheSessionsUntilTheyEnd() throws {
        let metrics = WorkerMetrics()
        let counts = Mutex((3, 4))
        let first = metrics.trackInFlight { counts.withLock { $0.0 } }
        let second = metrics.trackInFlight { counts.withLock { $0.1 } }
        #expect(try value(metrics, "wallet_in_flight_deliveries") == 7)
        counts.withLock { $0.0 = 0 }
        #expect(try value(metrics, "wallet_in_flight_deliveries") == 4)
        second.end()
        first.end()
        #expect(try value(metrics, "wallet_in_flight_deliveries") == 0)
    }

    @Test func storeBatchesAreTimedByOutcomeAndQueueDepthsByRole() throws {
        let metrics = WorkerMetrics()
        metrics.recordStoreBatch(.milliseconds(3), committed: true)
        metrics.recordStoreBatch(.seconds(5), committed: false)
        metrics.recordQueueDepth(queue: "w.work", role: .work, ready: 40, consumers: 2)
        metrics.recordQueueDepth(queue: "w.work", role: .work, ready: 38, consumers: 2)
        metrics.recordSessionFailure(AMQPError(code: .authenticationFailed, message: "refused", replyCode: 403))
        metrics.recordSessionFailure(AMQPError(code: .connectionLost, message: "gone"))
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(text.contains(#"wallet_store_batch_seconds_count{outcome="committed"} 1"#), "\(text)")
        #expect(text.contains(#"wallet_store_batch_seconds_count{outcome="failed"} 1"#), "\(text)")
        #expect(text.contains(#"wallet_queue_messages_ready{queue="w.work",role="work"} 38"#), "\(text)")
        #expect(text.contains(#"wallet_queue_consumers{queue="w.work",role="work"} 2"#), "\(text)")
        #expect(text.contains("wallet_broker_login_refusals_total 1"), "\(text)")
    }

    @Test func theProcessMetricsAreTheStandardOnes() throws {
        let text = String(decoding: ProcessMetrics.exposition(), as: UTF8.self)
        for (name, type) in [
            ("process_cpu_seconds_total", "counter"), ("process_resident_memory_bytes", "gauge"),
            ("process_virtual_memory_bytes", "gauge"), ("process_open_fds", "gauge"),
            ("process_max_fds", "gauge"), ("process_start_time_seconds", "gauge"),
        ] {
            #expect(text.contains("# TYPE \(name) \(type)\n\(name) "), "\(name): \(text)")
        }
        let sample = try #require(ProcessMetrics.read())
        #expect(sample.residentBytes > 1_000_000 && sample.cpuSeconds > 0)
        let start = try #require(sample.startTime)
        #expect(start <= Date().timeIntervalSince1970 && start > Date().timeIntervalSince1970 - 86_400)
        // `comm` may hold spaces and parentheses: the fields are read after its last ')'.
        let fields = try #require(
            ProcessMetrics.statFields(
                "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 111 222 13 14 15 16 17 18 999 4096 7 rest"))
        #expect(fields[14 - 3] == "111" && fields[22 - 3] == "999" && fields[24 - 3] == "7")
    }

    // MARK: - Exit statuses

    @Test func failuresMapToTheDocumentedExitStatuses() {
        let refused = AMQPError(code: .authenticationFailed, message: "refused", replyCode: 403)
        #expect(ExitStatus.of(BrokerLogin.Refused(error: refused, url: "amqp://u:***@h:5672/%2f")) == .unavailable)
        #expect(ExitStatus.of(AMQPError(code: .connectionFailed, message: "refused")) == .unavailable)
        #expect(ExitStatus.of(AMQPError(code: .channelClosedByBroker, message: "406", replyCode: 406)) == .failure)
        #expect(
            ExitStatus.of(
                StoreFailure(
                    StoreError(.permanent, "PostgreSQL authentication failed (SQLSTATE 28P01): x (db)")))
                == .unavailable)
        // A pooler that drops the session settings, or refuses them (PostgresConnectionSettings, StoreError.psql).
        #expect(
            ExitStatus.of(StoreError(.permanent, "PostgreSQL session settings were lost on the way to the server (x)"))
                == .unavailable)
        #expect(
            ExitStatus.of(StoreError(.permanent, "PostgreSQL connection refused the worker's session settings (x)"))
                == .unavailable)
        #expect(ExitStatus.of(StoreError(.permanent, "SQLite corrupt: malformed (/x)")) == .failure)
        // The operations endpoint's port taken is a ConfigurationError thrown while running: a failure (`run` maps
        // the ones `WorkerApplication.build` throws, settings that do not go together, to usage).
        #expect(ExitStatus.of(ConfigurationError("the operations endpoint cannot listen")) == .failure)
        #expect(ExitStatus.allCases.map(\.rawValue) == [0, 1, 2, 64, 130])
    }

    private func value(_ metrics: WorkerMetrics, _ name: String) throws -> Double {
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(name + " ") }, "\(name) missing")
        return try #require(Double(line.split(separator: " ").last ?? ""))
    }
}

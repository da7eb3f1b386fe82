import AMQPTransport
import Logging
import WalletRouting
import WalletStore

// The settings of `wallet-worker run`, each declared once: flag, variable, default (taken from
// `WorkerConfiguration`, never typed again), what a value must be, its range, its help and its README meaning.
//
// A new setting: hold its value and default in a `WorkerConfiguration` property, declare it here with that
// property as its `field` and list it in `configurable` (where the README shows it), then give the command an
// `@Option(Setting.x) var x: String?` listed with its entry in its group's `givenSettings`
// (Sources/wallet-worker/Options.swift): the option is applied and its range validated from this entry. `wallet-worker settings --markdown` then writes
// the README's table (CI compares them). A setting deployed with a value other than its default also goes into
// deploy/kubernetes/configmap.yaml.

extension Setting {
    /// Every setting, in the README's order (settings of one row together).
    public static let all: [Setting] = configurable.map(\.setting) + tracing

    /// The settings `WorkerConfiguration` holds, in the README's order: what the commands' options apply and
    /// `WorkerConfiguration.validate()` checks.
    public static let configurable: [any ConfigurationSetting] = [
        amqpURL, tlsCAFile, tlsCertFile, tlsKeyFile, heartbeat,
        store, prefetch, noMigrate, noDeclare, concurrency, orderedShards, retryDelay, retryDelayMax, retryAttempts,
        confirmTimeout, resultsPauseWindow, resultsPauseActivation, resultsPauseRatio, resultsPauseQuietActivation,
        consumerTimeout,
        storeBusyTimeout, storePoolSize, storeStatementTimeout, dedupRetention,
        shutdownGrace, httpPort, httpHost, queuePollInterval, logLevel, logFormat,
        inboundExchange, workQueue, queueType, deliveryLimit, retryQueue, deadLetterExchange, deadLetterQueue,
        eventsExchange, transactionsExchange, replenishmentExchange, actionsExchange, installationsExchange,
        maxBodyBytes, historyLimit, historyWindow, paymentKeyBatch, paymentKeyValidity,
    ]

    /// The defaults: `WorkerConfiguration`'s.
    private static let defaults = WorkerConfiguration()

    /// The longest wait between two attempts: a queue's x-message-ttl is at most 2^32-1 ms; a day is plenty.
    static let longestRetryWait: Duration = .seconds(86_400)

    // MARK: - The broker

    /// Parsed when read, as every other setting: a URL that does not parse is a usage error (64), said with its
    /// password redacted, not a failure to connect (1).
    public static let amqpURL = Typed<String>(
        "amqp-url", "AMQP_URL", field: .at(\.amqpURL), default: defaults.amqpURL, expected: "a URL",
        help: "Broker URL, amqp:// or amqps://",
        meaning: "the broker; `amqps://` for TLS (port 5671), percent-encoded user, password and vhost",
        reason: { text in
            do throws(AMQPError) {
                _ = try AMQPURL(parsing: text)
                return nil
            } catch {
                return error.message
            }
        },
        parse: { (try? AMQPURL(parsing: $0)) != nil ? $0 : nil })

    private static let tlsFiles = "TLS files"
    private static let tlsMeaning = """
        CA to verify the broker, client certificate and key (peer and hostname are verified). Without a CA file the \
        worker loads the system's bundle itself (librabbitmq 0.11 loads none): the file `SSL_CERT_FILE` names, else \
        the first that exists of `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt`, \
        `/etc/ssl/cert.pem`; `SSL_CERT_DIR` is not read
        """
    public static let tlsCAFile = Typed<String>.text(
        "tls-ca-file", "AMQP_TLS_CA_FILE", field: .optional(\.tls.caCertificatePath),
        default: defaults.tls.caCertificatePath, expected: "a path",
        help: "CA certificate file for amqps://", meaning: tlsMeaning, group: tlsFiles)
    public static let tlsCertFile = Typed<String>.text(
        "tls-cert-file", "AMQP_TLS_CERT_FILE", field: .optional(\.tls.clientCertificatePath),
        default: defaults.tls.clientCertificatePath, expected: "a path",
        help: "Client certificate file for amqps://", meaning: tlsMeaning, group: tlsFiles)
    public static let tlsKeyFile = Typed<String>.text(
        "tls-key-file", "AMQP_TLS_KEY_FILE", field: .optional(\.tls.clientKeyPath), default: defaults.tls.clientKeyPath,
        expected: "a path",
        help: "Client key file for amqps://", meaning: tlsMeaning, group: tlsFiles)

    public static let heartbeat = Typed<Duration>.duration(
        "heartbeat", "AMQP_HEARTBEAT", field: .at(\.heartbeat), default: defaults.heartbeat,
        help: "AMQP heartbeat, e.g. 10s",
        meaning: "AMQP heartbeat; a silent broker is declared gone after two intervals")

    // MARK: - The store and the processing

    /// Parsed by `StoreLocation(parsing:)`, whose error never repeats the value (a PostgreSQL URL holds a password).
    public static let store = Typed<StoreLocation>(
        "store", "WALLET_STORE", field: .at(\.store), default: defaults.store.description,
        expected: "sqlite:PATH, postgres://USER:PASSWORD@HOST:PORT/DATABASE or memory",
        help: "Store: sqlite:PATH, postgres://USER:PASSWORD@HOST:PORT/DATABASE or memory",
        meaning: """
            `sqlite:PATH` (a file, WAL mode, created when missing), `postgres://USER:PASSWORD@HOST:PORT/DATABASE` \
            (or `postgresql://`; shared by replicas, see [the store](docs/design/store.md)), or `memory` (lost at \
            exit; for trying things)
            """,
        reason: { text in
            do throws(StoreError) {
                _ = try StoreLocation(parsing: text)
                return nil
            } catch {
                return error.message
            }
        },
        parse: { try? StoreLocation(parsing: $0) })

    public static let prefetch = Typed<UInt16>(
        "prefetch", "WALLET_PREFETCH", field: .at(\.prefetch), default: String(defaults.prefetch),
        expected: "an integer from 1 to 65535",
        range: SettingRange(1..., "at least 1"),
        help: "Unacknowledged deliveries per consumer, the largest batch",
        meaning: "unacknowledged deliveries per pipeline: the largest batch", parse: { UInt16($0) })

    public static let noMigrate = Typed<Bool>.flag(
        "no-migrate", "WALLET_NO_MIGRATE", field: .negating(\.migratesStore), default: !defaults.migratesStore,
        help: """
            Do not migrate the store's schema; refuse to start unless it is this build's (for a database user \
            without DDL rights; run `wallet-worker migrate` in a deploy job)
            """,
        meaning: """
            `run` changes no schema: for a database role without DDL rights. The worker checks the store's schema at \
            start and refuses to start unless this build can run on it (every table change it needs; index builds, \
            and PostgreSQL's v6 and v7 that retire what older builds read, may be pending; a newer build's \
            migrations only if they declare this build compatible), naming the command that fixes it (`wallet-worker \
            migrate --store …`, run by a deploy job with a role that may create tables); it creates no SQLite file. \
            Without the flag the worker applies table changes at start, and index builds, v6 and v7 only to a new \
            store (`wallet-worker migrate` builds the indexes, and applies v6 and v7 with `--retire-older-builds`; a \
            schema newer than the build and not compatible with it is refused either way). Tested: \
            `Resilience.StoreTools`, `SchemaMigrationTests`, `SchemaRolloutTests`
            """)

    public static let noDeclare = Typed<Bool>.flag(
        "no-declare", "WALLET_NO_DECLARE", field: .negating(\.declaresTopology), default: !defaults.declaresTopology,
        help: """
            Do not declare the topology (for a broker user without configure rights; run `wallet-worker declare` in \
            a deploy job)
            """,
        meaning: """
            `run` declares nothing: for a broker user without `configure` permission (`rabbitmqctl set_permissions \
            -p / wallet-runtime '^$' '.*' '.*'`); a deploy job runs `wallet-worker declare` with a user that has it. \
            A worker without the flag whose user may not declare stops at start (403 `ACCESS_REFUSED`) naming the \
            flag. Tested: `Resilience.LeastPrivilege`
            """)

    public static let concurrency = Typed<Int>.count(
        "concurrency", "WALLET_CONCURRENCY", field: .at(\.concurrency), default: defaults.concurrency,
        // Each pipeline has two connections.
        range: .between(1...64),
        help: "Parallel pipelines on the work queue; above 1 queue order is not kept; not used in the ordered mode",
        meaning: """
            parallel pipelines on the work queue, each with its own two connections; above 1, queue order is not \
            kept; does not apply in the ordered mode
            """)

    /// Checked when parsed and by `validate()`: each shard is a pipeline with two connections.
    public static let orderedShards: Typed<Int> = {
        let bounds = 0...64
        return Typed<Int>(
            "ordered-shards", "WALLET_ORDERED_SHARDS", field: .at(\.topology.orderedShards),
            default: String(defaults.topology.orderedShards), note: "off",
            expected: "an integer from \(bounds.lowerBound) (off) to \(bounds.upperBound)",
            range: SettingRange(bounds, "between \(bounds.lowerBound) (off) and \(bounds.upperBound)"),
            checkedWhenParsed: true,
            help: """
                Ordered mode: N consistent-hash shard queues with a single active consumer, keyed by the \
                digitalCardId header; 0 is off
                """,
            meaning: """
                the [ordered mode](docs/design/ordered-mode.md): N (1-\(bounds.upperBound)) consistent-hash \
                shard queues with a single active consumer, keyed by the `digitalCardId` header; per-card order with \
                several pipelines and replicas
                """,
            parse: { Int($0) })
    }()

    public static let retryDelay = Typed<Duration>.duration(
        "retry-delay", "WALLET_RETRY_DELAY", field: .at(\.retryDelay), default: defaults.retryDelay,
        range: SettingRange(.milliseconds(1)...longestRetryWait, "between 1 ms and 24 h"),
        help: """
            Delay in the retry queue, its x-message-ttl, e.g. 5s; it doubles with each further retry, in queues \
            <retry queue>.2, .3, …
            """,
        meaning: """
            time in the retry queue (its `x-message-ttl`) before a transient failure is tried again; each further \
            retry waits twice as long, in `<retry queue>.2`, `.3`, … (see *Guarantees*)
            """)

    /// `validate()` also requires at least `--retry-delay`.
    public static let retryDelayMax = Typed<Duration>.duration(
        "retry-delay-max", "WALLET_RETRY_DELAY_MAX", field: .optional(\.longestRetryDelay),
        default: WorkerConfiguration.defaultLongestRetryDelay,
        note: "or `--retry-delay` if longer",
        range: SettingRange(...longestRetryWait, "between --retry-delay and 24 h"),
        help: "Longest wait between two attempts of one message",
        meaning: "the longest wait between two attempts of one message: the last retry queue's TTL")

    public static let retryAttempts = Typed<Int>.count(
        "retry-attempts", "WALLET_RETRY_ATTEMPTS", field: .at(\.retryAttempts), default: defaults.retryAttempts,
        range: .atLeast(1),
        help: """
            Processing attempts before a transient failure dead-letters; with --retry-delay(-max) it sets how many \
            retry queues there are
            """,
        meaning: """
            processing attempts before a transient failure dead-letters the message; with the two delays it sets how \
            many retry queues there are (`declare` takes all three)
            """)

    public static let confirmTimeout = Typed<Duration>.duration(
        "confirm-timeout", "WALLET_CONFIRM_TIMEOUT", field: .at(\.confirmTimeout), default: defaults.confirmTimeout,
        range: SettingRange(.milliseconds(1)..., "positive"),
        help: "Wait for publisher confirms, e.g. 10s",
        meaning: """
            wait for publisher confirms; a result not confirmed in time pauses the worker as a failure every message \
            meets (the results pause, below): it gives back what it holds, and nothing is dead-lettered for it
            """)

    private static let resultsPause = "the results pause"

    public static let resultsPauseWindow = Typed<Duration>.duration(
        "results-pause-window", "WALLET_RESULTS_PAUSE_WINDOW", field: .at(\.resultsPauseWindow),
        default: defaults.resultsPauseWindow, minimum: .seconds(1),
        help: "How far back the results pause looks at refused results, e.g. 10s",
        meaning: """
            how far back the rule that pauses the worker looks: when results are refused (returned `NO_ROUTE`, \
            nacked) for at least the activation count of distinct messages and the ratio of deliveries in this \
            window, or a confirm times out, every message fails alike: the worker gives back what it holds and \
            takes no more until a trial finds the results taken; nothing is dead-lettered for it (CONTRACT.md §8). \
            Also how long a trial waits for a verdict
            """)

    public static let resultsPauseActivation = Typed<Int>.count(
        "results-pause-activation", "WALLET_RESULTS_PAUSE_ACTIVATION", field: .at(\.resultsPauseActivation),
        default: defaults.resultsPauseActivation, range: .atLeast(1),
        help: "Distinct messages refused in the window before the results pause is considered",
        meaning: """
            distinct messages whose results were refused in the window before the pause is considered: one message \
            retried again and again is one message, so one bad route cannot pause the worker
            """)

    public static let resultsPauseRatio = Typed<Double>(
        "results-pause-ratio", "WALLET_RESULTS_PAUSE_RATIO", field: .at(\.resultsPauseRatio),
        default: String(defaults.resultsPauseRatio), expected: "a number like 0.5",
        range: SettingRange(phrase: "greater than 0 and at most 1") { $0 > 0 && $0 <= 1 },
        help: "Share of the window's deliveries refused that pauses the worker",
        meaning: """
            the share of the window's deliveries whose results were refused that pauses the worker; below it, a \
            refusal is the message's own (retried, then dead-lettered)
            """, parse: { Double($0).flatMap { $0.isFinite ? $0 : nil } })

    public static let resultsPauseQuietActivation = Typed<Int>.count(
        "results-pause-quiet-activation", "WALLET_RESULTS_PAUSE_QUIET_ACTIVATION",
        field: .at(\.resultsPauseQuietActivation), default: defaults.resultsPauseQuietActivation,
        help: "Distinct messages refused since results were last taken before a last attempt pauses (0: never)",
        meaning: """
            for traffic too thin for the activation count: a message whose results are refused on its last attempt \
            pauses the worker instead of being dead-lettered when this many distinct messages (itself included) had \
            results refused since results were last taken, and none were taken in the window or in the least time \
            its retries took. A message alone is dead-lettered. `0` turns it off
            """)

    /// Checked when parsed.
    public static let consumerTimeout = Typed<Duration>.duration(
        "consumer-timeout", "WALLET_CONSUMER_TIMEOUT", field: .at(\.consumerTimeout), default: defaults.consumerTimeout,
        minimum: .seconds(2),
        help: """
            The broker's consumer_timeout; deliveries held while the store is out are given back at half of it
            """,
        meaning: """
            the broker's `consumer_timeout` (RabbitMQ's default): deliveries held while the store is out are given \
            back at half of it and the pipeline pauses until the store answers; set it to your broker's (at least \
            2 s)
            """)

    public static let storeBusyTimeout = Typed<Duration>.duration(
        "store-busy-timeout", "WALLET_STORE_BUSY_TIMEOUT", field: .at(\.storeBusyTimeout),
        default: defaults.storeBusyTimeout,
        help: "Store lock wait before a batch counts as failed",
        meaning: """
            wait for the SQLite write lock; then the store counts as out (another process holds it) and the batch is \
            held
            """)

    public static let storePoolSize = Typed<Int>.count(
        "store-pool-size", "WALLET_STORE_POOL_SIZE", field: .at(\.storePoolSize), default: defaults.storePoolSize,
        range: .between(1...1_000),
        help: "PostgreSQL connections per process",
        meaning: """
            PostgreSQL: connections per worker process at most (each pipeline uses one per batch, the retention sweep \
            one)
            """)

    public static let storeStatementTimeout = Typed<Duration>.duration(
        "store-statement-timeout", "WALLET_STORE_STATEMENT_TIMEOUT", field: .at(\.storeStatementTimeout),
        default: defaults.storeStatementTimeout,
        range: SettingRange(.milliseconds(1)..., "positive"),
        help: "PostgreSQL statement timeout, lock waits included, e.g. 5s",
        meaning: """
            PostgreSQL: longest a statement may run, waits for another replica's row locks included, and longest a \
            batch waits for a pooled connection (at least 1 s); then the batch is a transient failure
            """)

    public static let dedupRetention = Typed<Duration>.duration(
        "dedup-retention", "WALLET_DEDUP_RETENTION", field: .at(\.deduplicationRetention),
        default: defaults.deduplicationRetention,
        range: SettingRange(.seconds(1)..., "at least 1 s"),
        help: "How long processed message ids are kept for deduplication",
        meaning: "how long processed `message_id`s (and their results) are kept for deduplication")

    public static let shutdownGrace = Typed<Duration>.duration(
        "shutdown-grace", "WALLET_SHUTDOWN_GRACE", field: .at(\.shutdownGracePeriod),
        default: defaults.shutdownGracePeriod,
        help: "Time to drain after SIGTERM",
        meaning: "time to drain after SIGTERM (Kubernetes' default grace is 30 s)")

    // MARK: - Operations

    /// nil: off.
    public static let httpPort = Typed<Int?>(
        "http-port", "WALLET_HTTP_PORT", field: .at(\.httpPort), default: defaults.httpPort.map { String($0) } ?? "off",
        expected: "a port number or off", range: SettingRange.between(0...65_535).whenSet,
        help: "Port of /healthz, /readyz, /metrics; 0 picks one, off disables",
        meaning: "`/healthz`, `/readyz`, `/metrics`; `0` picks a free port, `off` disables",
        parse: { text -> Int?? in text == "off" ? .some(nil) : SettingParsers.count(text).map { .some($0) } })

    public static let httpHost = Typed<String>.text(
        "http-host", "WALLET_HTTP_HOST", field: .at(\.httpHost), default: defaults.httpHost, expected: "an address",
        help: "Address of the operations endpoint", meaning: "address of that endpoint")

    /// nil: off.
    public static let queuePollInterval = Typed<Duration?>(
        "queue-poll-interval", "WALLET_QUEUE_POLL_INTERVAL", field: .at(\.queuePollInterval),
        default: defaults.queuePollInterval.map(DurationText.format) ?? "off",
        expected: "a duration like \(defaults.queuePollInterval.map(DurationText.format) ?? "15s"), or off",
        help: """
            How often to ask the broker for the depth of the work, retry and dead-letter queues \
            (wallet_queue_messages_ready); off disables
            """,
        meaning: """
            how often the broker is asked for the depth of the work queue (or shards), every retry level and the \
            dead-letter queue (`wallet_queue_messages_ready`, the `WalletStalled` alert; a passive `queue.declare` \
            each, on a connection of its own); `off` disables
            """,
        parse: { text -> Duration?? in
            text == "off" ? .some(nil) : SettingParsers.duration(text).flatMap { $0 > .zero ? .some($0) : nil }
        })

    public static let logLevel = Typed<Logger.Level>.choice(
        "log-level", "LOG_LEVEL", field: .at(\.logLevel), default: defaults.logLevel, caseInsensitive: true,
        help: nil, meaning: "`trace` … `critical`; `debug` logs every message")

    public static let logFormat = Typed<LogFormat>.choice(
        "log-format", "LOG_FORMAT", field: .at(\.logFormat), default: defaults.logFormat, caseInsensitive: true,
        help: nil, meaning: "`text`, or `json` (one object per line) for log collectors")

    // MARK: - The topology

    public static let inboundExchange = Typed<String>.name(
        "inbound-exchange", "WALLET_INBOUND_EXCHANGE", field: .at(\.topology.inboundExchange),
        default: defaults.topology.inboundExchange,
        help: "Inbound topic exchange", meaning: "topic exchange the backend publishes to")

    public static let workQueue = Typed<String>.name(
        "work-queue", "WALLET_WORK_QUEUE", field: .at(\.topology.workQueue), default: defaults.topology.workQueue,
        help: "Work queue",
        meaning: """
            bound to the inbound exchange with `#` (unbound in the ordered mode; shards are \
            `<work queue>.shard.<k>`)
            """)

    public static let queueType = Typed<Topology.QueueType>.choice(
        "queue-type", "WALLET_QUEUE_TYPE", field: .at(\.topology.workQueueType),
        default: defaults.topology.workQueueType, caseInsensitive: false,
        help: "Work queue type, classic or quorum",
        meaning: """
            `classic` or `quorum` (every queue the worker declares: the work queue or shards, the retry queues and the \
            dead-letter queue)
            """)

    public static let deliveryLimit = Typed<Int>.count(
        "delivery-limit", "WALLET_DELIVERY_LIMIT", field: .at(\.topology.deliveryLimit),
        default: defaults.topology.deliveryLimit, range: .atLeast(1),
        help: "Quorum work queue's x-delivery-limit",
        meaning: """
            quorum only: `x-delivery-limit`, deliveries of a message that crashes the worker before the broker \
            dead-letters it
            """)

    public static let retryQueue = Typed<String>.name(
        "retry-queue", "WALLET_RETRY_QUEUE", field: .at(\.topology.retryQueue), default: defaults.topology.retryQueue,
        help: "Retry queue",
        meaning: """
            the first retry's queue; later retries wait in `<retry queue>.2`, `.3`, …; each shard's is \
            `<retry queue>.shard.<k>` (and `.2`, …)
            """)

    public static let deadLetterExchange = Typed<String>.name(
        "dead-letter-exchange", "WALLET_DEAD_LETTER_EXCHANGE", field: .at(\.topology.deadLetterExchange),
        default: defaults.topology.deadLetterExchange,
        help: "Dead-letter exchange", meaning: "fanout")

    public static let deadLetterQueue = Typed<String>.name(
        "dead-letter-queue", "WALLET_DEAD_LETTER_QUEUE", field: .at(\.topology.deadLetterQueue),
        default: defaults.topology.deadLetterQueue,
        help: "Dead-letter queue", meaning: "")

    private static let resultExchanges = "result exchanges"
    public static let eventsExchange = Typed<String>.name(
        "events-exchange", "WALLET_EVENTS_EXCHANGE", field: .at(\.topology.resultExchanges.events),
        default: defaults.topology.resultExchanges.events,
        help: "Card events exchange", meaning: "result exchanges (topic)", group: resultExchanges)
    public static let transactionsExchange = Typed<String>.name(
        "transactions-exchange", "WALLET_TRANSACTIONS_EXCHANGE", field: .at(\.topology.resultExchanges.transactions),
        default: defaults.topology.resultExchanges.transactions,
        help: "Transaction records exchange", meaning: "result exchanges (topic)", group: resultExchanges)
    public static let replenishmentExchange = Typed<String>.name(
        "replenishment-exchange", "WALLET_REPLENISHMENT_EXCHANGE", field: .at(\.topology.resultExchanges.replenishment),
        default: defaults.topology.resultExchanges.replenishment,
        help: "Replenishment outcomes exchange", meaning: "result exchanges (topic)", group: resultExchanges)
    public static let actionsExchange = Typed<String>.name(
        "actions-exchange", "WALLET_ACTIONS_EXCHANGE", field: .at(\.topology.resultExchanges.actions),
        default: defaults.topology.resultExchanges.actions,
        help: "Triggered actions exchange", meaning: "result exchanges (topic)", group: resultExchanges)
    public static let installationsExchange = Typed<String>.name(
        "installations-exchange", "WALLET_INSTALLATIONS_EXCHANGE", field: .at(\.topology.resultExchanges.installations),
        default: defaults.topology.resultExchanges.installations,
        help: "Installation outcomes exchange", meaning: "result exchanges (topic)", group: resultExchanges)

    // MARK: - The routing core

    public static let maxBodyBytes = Typed<Int>.count(
        "max-body-bytes", "WALLET_MAX_BODY_BYTES", field: .at(\.routing.maximumBodyBytes),
        default: defaults.routing.maximumBodyBytes,
        help: "Largest accepted body in bytes",
        meaning: """
            largest accepted body; a larger one gets a `rejected` result and is dead-lettered with `x-worker-error`; \
            one over twice this is never read into memory and is dead-lettered by the broker (see Hostile input)
            """)

    public static let historyLimit = Typed<Int>.count(
        "history-limit", "WALLET_HISTORY_LIMIT", field: .at(\.routing.transactionHistoryLimit),
        default: defaults.routing.transactionHistoryLimit,
        help: "Records in a TNS result", meaning: "records in a TNS result")

    public static let historyWindow = Typed<Duration>.duration(
        "history-window", "WALLET_HISTORY_WINDOW", field: .seconds(\.routing.transactionHistoryWindowSeconds),
        default: .seconds(defaults.routing.transactionHistoryWindowSeconds),
        help: "TNS records window before the newest kept one, e.g. 30d as 720h",
        meaning: "TNS records older than this before the newest kept one are left out")

    public static let paymentKeyBatch = Typed<Int>.count(
        "payment-key-batch", "WALLET_PAYMENT_KEY_BATCH", field: .at(\.routing.paymentKeyBatchSize),
        default: defaults.routing.paymentKeyBatchSize,
        help: "numberOfPaymentsLeft after a replenishment",
        meaning: "`numberOfPaymentsLeft` after a replenishment")

    public static let paymentKeyValidity = Typed<Duration>.duration(
        "payment-key-validity", "WALLET_PAYMENT_KEY_VALIDITY", field: .seconds(\.routing.paymentKeyValiditySeconds),
        default: .seconds(defaults.routing.paymentKeyValiditySeconds),
        help: "Validity of replenished keys", meaning: "validity of replenished keys")

    // MARK: - Tracing: the OpenTelemetry SDK's variables (no flag, no _FILE form)

    /// Read by `TracingSettings(environment:)` and `OTLPExportSettings(environment:)`; the defaults of the batch span
    /// processor and the export timeout are the worker's (`OTLPExportSettings.defaults`).
    static let tracing: [Setting] = [
        .environment(
            "OTEL_TRACES_EXPORTER", shown: "unset (off)",
            meaning: """
                `otlp` turns [tracing](docs/operations.md#tracing) on; `none` keeps it off; any other exporter stops the worker at \
                start (this build exports OTLP only)
                """),
        .environment(
            "OTEL_EXPORTER_OTLP_ENDPOINT", default: "http://localhost:4318",
            meaning: """
                the collector; setting either one without `OTEL_TRACES_EXPORTER` also turns tracing on. `https://` \
                with `OTEL_EXPORTER_OTLP_CERTIFICATE` (and `_CLIENT_CERTIFICATE`, `_CLIENT_KEY`) for TLS
                """,
            group: "OTLP endpoint"),
        .environment(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", shown: "`OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` appended",
            group: "OTLP endpoint"),
        .environment(
            "OTEL_EXPORTER_OTLP_PROTOCOL", default: TracingSettings.off.otlpProtocol,
            meaning: "or `http/json`; `grpc` stops the worker at start (not built in)", group: "OTLP protocol"),
        .environment(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", default: TracingSettings.off.otlpProtocol, group: "OTLP protocol"),
        .environment(
            "OTEL_SDK_DISABLED", default: "false", meaning: "`true` turns tracing off whatever else is set"),
        .environment(
            "OTEL_SERVICE_NAME", default: OTLPExportSettings.defaults.serviceName,
            meaning: """
                the spans' `service.name` (else a `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, which adds resource \
                attributes)
                """),
        .environment(
            TracingSettings.detailVariable, default: TraceDetail.message.rawValue,
            meaning: """
                the spans of a traced message: `message`, one `process` span per message; `full` adds a span for the \
                batch's store transaction and one per published message (3.2 spans per message instead of one; see \
                [Tracing](docs/operations.md#tracing))
                """),
        .environment(
            "OTEL_TRACES_SAMPLER", default: "parentbased_always_on",
            meaning: """
                `always_on`, `always_off`, `traceidratio`, `parentbased_traceidratio` (with the ratio in `_ARG`), … \
                as the OpenTelemetry specification defines them
                """,
            group: "sampler"),
        .environment("OTEL_TRACES_SAMPLER_ARG", group: "sampler"),
        .environment(
            "OTEL_EXPORTER_OTLP_HEADERS",
            meaning:
                "headers of every export, `k=v,k2=v2`, values percent-decoded (e.g. a collector's token); never logged (see *Logs*)"
        ),
        .environment(
            "OTEL_EXPORTER_OTLP_COMPRESSION", default: "none",
            meaning: """
                `gzip` is accepted and not done: the exports go uncompressed, and the worker warns once at start; \
                any other value but `none` stops the worker at start
                """,
            group: "export compression"),
        .environment("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", default: "none", group: "export compression"),
        .environment(
            "OTEL_EXPORTER_OTLP_TIMEOUT", default: milliseconds(OTLPExportSettings.defaults.requestTimeout), note: "ms",
            meaning: """
                the longest one export request may take, and an export with its retries of a busy collector \
                (`OTEL_BSP_EXPORT_TIMEOUT`); its spans are then dropped and counted \
                (`wallet_spans_dropped_total{reason="export_failed"}`)
                """,
            group: "export timeout"),
        .environment(
            "OTEL_BSP_EXPORT_TIMEOUT", default: milliseconds(OTLPExportSettings.defaults.exportTimeout), note: "ms",
            group: "export timeout"),
        .environment(
            "OTEL_BSP_SCHEDULE_DELAY", default: milliseconds(OTLPExportSettings.defaults.scheduleDelay), note: "ms",
            meaning: """
                the batch span processor, sized for the worker's full speed (the specification's 5 s, 512 and 2,048 \
                dropped spans above about 400 messages per second; see [Tracing](docs/operations.md#tracing))
                """,
            group: "batch span processor"),
        .environment(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", default: String(OTLPExportSettings.defaults.maxExportBatchSize),
            group: "batch span processor"),
        .environment(
            "OTEL_BSP_MAX_QUEUE_SIZE", default: String(OTLPExportSettings.defaults.maxQueueSize),
            group: "batch span processor"),
    ]

    private static func milliseconds(_ duration: Duration) -> String {
        String(duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }
}

// MARK: - The kinds of value

extension Setting.Typed where Value == String {
    /// Any text: a URL, a path, an address.
    static func text(
        _ name: String, _ variable: String, field: SettingField<String>, default value: String?, expected: String,
        help: String, meaning: String, group: String? = nil
    ) -> Self {
        Self(
            name, variable, field: field, default: value, expected: expected, help: help, meaning: meaning,
            group: group, parse: { $0 })
    }

    /// The name of an exchange or a queue.
    static func name(
        _ name: String, _ variable: String, field: SettingField<String>, default value: String, help: String,
        meaning: String, group: String? = nil
    ) -> Self {
        text(
            name, variable, field: field, default: value, expected: "a name", help: help, meaning: meaning,
            group: group)
    }
}

extension Setting.Typed where Value == Duration {
    /// "a duration like 10s, from 0 to 87600h". `range` is checked by `validate()`; a `minimum` instead when parsed
    /// ("from 2s to 87600h").
    static func duration(
        _ name: String, _ variable: String, field: SettingField<Duration>, default value: Duration, note: String? = nil,
        range: SettingRange<Duration>? = nil, minimum: Duration? = nil, help: String, meaning: String
    ) -> Self {
        let example = DurationText.format(value)
        let accepted =
            minimum.map {
                "from \(DurationText.format($0)) to \(DurationText.format(DurationText.maximum))"
            } ?? DurationText.rangeDescription
        return Self(
            name, variable, field: field, default: example, note: note,
            expected: "a duration like \(example), \(accepted)",
            range: minimum.map { SettingRange($0..., "at least \(DurationText.format($0))") } ?? range,
            checkedWhenParsed: minimum != nil, help: help, meaning: meaning, parse: SettingParsers.duration)
    }
}

extension Setting.Typed where Value == Int {
    /// "a positive integer" (0 included: a range refuses it where it makes no sense).
    static func count(
        _ name: String, _ variable: String, field: SettingField<Int>, default value: Int,
        range: SettingRange<Int>? = nil, help: String, meaning: String
    ) -> Self {
        Self(
            name, variable, field: field, default: String(value), expected: "a positive integer", range: range,
            help: help,
            meaning: meaning, parse: SettingParsers.count)
    }
}

extension Setting.Typed where Value == Bool {
    /// `--no-declare`, or `WALLET_NO_DECLARE=true` (true, 1, yes; false, 0, no).
    static func flag(
        _ name: String, _ variable: String, field: SettingField<Bool>, default value: Bool, help: String,
        meaning: String
    ) -> Self {
        Self(
            name, variable, field: field, kind: .flag, default: String(value), expected: "true or false", help: help,
            meaning: meaning, parse: SettingParsers.bool)
    }
}

extension Setting.Typed where Value: RawRepresentable & CaseIterable & Sendable, Value.RawValue == String {
    /// One of the raw values ("classic or quorum"); the help is the same list when none is given.
    static func choice(
        _ name: String, _ variable: String, field: SettingField<Value>, default value: Value, caseInsensitive: Bool,
        help: String?, meaning: String
    ) -> Self {
        let alternatives = SettingParsers.alternatives(Value.allCases.map(\.rawValue))
        return Self(
            name, variable, field: field, default: value.rawValue, expected: alternatives, help: help ?? alternatives,
            meaning: meaning,
            parse: { Value(rawValue: caseInsensitive ? $0.lowercased() : $0) })
    }
}

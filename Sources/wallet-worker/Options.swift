import ArgumentParser
import Logging
import WalletRouting
import WalletStore
import WalletWorker

// The flags, grouped as the README's configuration table is. Each help names its environment variable;
// `Settings.swift` resolves flag, then variable, then the default of `WorkerConfiguration`.

struct BrokerOptions: ParsableArguments {
    @Option(help: "Broker URL, amqp:// or amqps:// (env AMQP_URL). Default: amqp://guest:guest@127.0.0.1:5672/%2f")
    var amqpURL: String?
    @Option(help: "CA certificate file for amqps:// (env AMQP_TLS_CA_FILE).")
    var tlsCaFile: String?
    @Option(help: "Client certificate file for amqps:// (env AMQP_TLS_CERT_FILE).")
    var tlsCertFile: String?
    @Option(help: "Client key file for amqps:// (env AMQP_TLS_KEY_FILE).")
    var tlsKeyFile: String?
    @Option(help: "AMQP heartbeat, e.g. 10s (env AMQP_HEARTBEAT). Default: 10s")
    var heartbeat: String?
    @Option(help: "Inbound topic exchange (env WALLET_INBOUND_EXCHANGE). Default: wallet.notifications")
    var inboundExchange: String?
    @Option(help: "Work queue (env WALLET_WORK_QUEUE). Default: wallet.notifications.work")
    var workQueue: String?
    @Option(help: "Work queue type, classic or quorum (env WALLET_QUEUE_TYPE). Default: classic")
    var queueType: String?
    @Option(help: "Quorum work queue's x-delivery-limit (env WALLET_DELIVERY_LIMIT). Default: 20")
    var deliveryLimit: String?
    @Option(help: "Retry queue (env WALLET_RETRY_QUEUE). Default: wallet.notifications.retry")
    var retryQueue: String?
    @Option(help: "Ordered mode: N consistent-hash shard queues with a single active consumer, keyed by the digitalCardId header; 0 is off (env WALLET_ORDERED_SHARDS). Default: 0")
    var orderedShards: String?
    @Option(help: "Delay in the retry queue, its x-message-ttl, e.g. 5s; it doubles with each further retry, in queues <retry queue>.2, .3, … (env WALLET_RETRY_DELAY). Default: 5s")
    var retryDelay: String?
    @Option(help: "Longest wait between two attempts of one message (env WALLET_RETRY_DELAY_MAX). Default: 5m, or --retry-delay if longer")
    var retryDelayMax: String?
    @Option(help: "Processing attempts before a transient failure dead-letters; with --retry-delay(-max) it sets how many retry queues there are (env WALLET_RETRY_ATTEMPTS). Default: 5")
    var retryAttempts: String?
    @Option(help: "Dead-letter exchange (env WALLET_DEAD_LETTER_EXCHANGE). Default: wallet.notifications.dlx")
    var deadLetterExchange: String?
    @Option(help: "Dead-letter queue (env WALLET_DEAD_LETTER_QUEUE). Default: wallet.notifications.dead")
    var deadLetterQueue: String?
    @Option(help: "Card events exchange (env WALLET_EVENTS_EXCHANGE). Default: wallet.events")
    var eventsExchange: String?
    @Option(help: "Transaction records exchange (env WALLET_TRANSACTIONS_EXCHANGE). Default: wallet.transactions")
    var transactionsExchange: String?
    @Option(help: "Replenishment outcomes exchange (env WALLET_REPLENISHMENT_EXCHANGE). Default: wallet.replenishment")
    var replenishmentExchange: String?
    @Option(help: "Triggered actions exchange (env WALLET_ACTIONS_EXCHANGE). Default: wallet.actions")
    var actionsExchange: String?
    @Option(help: "Installation outcomes exchange (env WALLET_INSTALLATIONS_EXCHANGE). Default: wallet.installations")
    var installationsExchange: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        assign(try setting(amqpURL, "--amqp-url", "AMQP_URL", expected: "a URL", text), to: &configuration.amqpURL)
        configuration.tls.caCertificatePath = try setting(tlsCaFile, "--tls-ca-file", "AMQP_TLS_CA_FILE", expected: "a path", text)
        configuration.tls.clientCertificatePath = try setting(tlsCertFile, "--tls-cert-file", "AMQP_TLS_CERT_FILE", expected: "a path", text)
        configuration.tls.clientKeyPath = try setting(tlsKeyFile, "--tls-key-file", "AMQP_TLS_KEY_FILE", expected: "a path", text)
        assign(try setting(heartbeat, "--heartbeat", "AMQP_HEARTBEAT", expected: "a duration like 10s, from 0 to 87600h", duration),
               to: &configuration.heartbeat)
        var topology = configuration.topology
        assign(try setting(inboundExchange, "--inbound-exchange", "WALLET_INBOUND_EXCHANGE", expected: "a name", text), to: &topology.inboundExchange)
        assign(try setting(workQueue, "--work-queue", "WALLET_WORK_QUEUE", expected: "a name", text), to: &topology.workQueue)
        assign(try setting(queueType, "--queue-type", "WALLET_QUEUE_TYPE", expected: "classic or quorum", Topology.QueueType.init(rawValue:)),
               to: &topology.workQueueType)
        assign(try setting(deliveryLimit, "--delivery-limit", "WALLET_DELIVERY_LIMIT", expected: "a positive integer", positiveInt),
               to: &topology.deliveryLimit)
        assign(try setting(retryQueue, "--retry-queue", "WALLET_RETRY_QUEUE", expected: "a name", text), to: &topology.retryQueue)
        assign(try setting(orderedShards, "--ordered-shards", "WALLET_ORDERED_SHARDS", expected: "an integer from 0 (off) to 64",
                           { Int($0).flatMap { (0...64).contains($0) ? $0 : nil } }),
               to: &topology.orderedShards)
        assign(try setting(retryDelay, "--retry-delay", "WALLET_RETRY_DELAY", expected: "a duration like 5s, from 0 to 87600h", duration),
               to: &configuration.retryDelay)
        configuration.longestRetryDelay = try setting(
            retryDelayMax, "--retry-delay-max", "WALLET_RETRY_DELAY_MAX", expected: "a duration like 5m, from 0 to 87600h", duration)
        assign(try setting(retryAttempts, "--retry-attempts", "WALLET_RETRY_ATTEMPTS", expected: "a positive integer", positiveInt),
               to: &configuration.retryAttempts)
        assign(try setting(deadLetterExchange, "--dead-letter-exchange", "WALLET_DEAD_LETTER_EXCHANGE", expected: "a name", text),
               to: &topology.deadLetterExchange)
        assign(try setting(deadLetterQueue, "--dead-letter-queue", "WALLET_DEAD_LETTER_QUEUE", expected: "a name", text), to: &topology.deadLetterQueue)
        assign(try setting(eventsExchange, "--events-exchange", "WALLET_EVENTS_EXCHANGE", expected: "a name", text), to: &topology.resultExchanges.events)
        assign(try setting(transactionsExchange, "--transactions-exchange", "WALLET_TRANSACTIONS_EXCHANGE", expected: "a name", text),
               to: &topology.resultExchanges.transactions)
        assign(try setting(replenishmentExchange, "--replenishment-exchange", "WALLET_REPLENISHMENT_EXCHANGE", expected: "a name", text),
               to: &topology.resultExchanges.replenishment)
        assign(try setting(actionsExchange, "--actions-exchange", "WALLET_ACTIONS_EXCHANGE", expected: "a name", text),
               to: &topology.resultExchanges.actions)
        assign(try setting(installationsExchange, "--installations-exchange", "WALLET_INSTALLATIONS_EXCHANGE", expected: "a name", text),
               to: &topology.resultExchanges.installations)
        configuration.topology = topology
    }
}

struct WorkerOptions: ParsableArguments {
    @Option(help: "Store: sqlite:PATH, postgres://USER:PASSWORD@HOST:PORT/DATABASE or memory (env WALLET_STORE). Default: sqlite:wallet.sqlite")
    var store: String?
    @Flag(help: "Do not declare the topology (for a broker user without configure rights; run `wallet-worker declare` in a deploy job) (env WALLET_NO_DECLARE=true)")
    var noDeclare = false
    @Flag(help: "Do not migrate the store's schema; refuse to start unless it is this build's (for a database user without DDL rights; run `wallet-worker migrate` in a deploy job) (env WALLET_NO_MIGRATE=true)")
    var noMigrate = false
    @Option(help: "Unacknowledged deliveries per consumer, the largest batch (env WALLET_PREFETCH). Default: 200")
    var prefetch: String?
    @Option(help: "Parallel pipelines on the work queue; above 1 queue order is not kept; not used in the ordered mode (env WALLET_CONCURRENCY). Default: 1")
    var concurrency: String?
    @Option(help: "Wait for publisher confirms, e.g. 10s (env WALLET_CONFIRM_TIMEOUT). Default: 10s")
    var confirmTimeout: String?
    @Option(help: "The broker's consumer_timeout; deliveries held while the store is out are given back at half of it (env WALLET_CONSUMER_TIMEOUT). Default: 30m")
    var consumerTimeout: String?
    @Option(help: "Store lock wait before a batch counts as failed (env WALLET_STORE_BUSY_TIMEOUT). Default: 5s")
    var storeBusyTimeout: String?
    @Option(help: "PostgreSQL connections per process (env WALLET_STORE_POOL_SIZE). Default: 4")
    var storePoolSize: String?
    @Option(help: "PostgreSQL statement timeout, lock waits included, e.g. 5s (env WALLET_STORE_STATEMENT_TIMEOUT). Default: 5s")
    var storeStatementTimeout: String?
    @Option(help: "How long processed message ids are kept for deduplication (env WALLET_DEDUP_RETENTION). Default: 24h")
    var dedupRetention: String?
    @Option(help: "Time to drain after SIGTERM (env WALLET_SHUTDOWN_GRACE). Default: 25s")
    var shutdownGrace: String?
    @Option(help: "Port of /healthz, /readyz, /metrics; 0 picks one, off disables (env WALLET_HTTP_PORT). Default: 9090")
    var httpPort: String?
    @Option(help: "Address of the operations endpoint (env WALLET_HTTP_HOST). Default: 0.0.0.0")
    var httpHost: String?
    @Option(help: "How often to ask the broker for the depth of the work, retry and dead-letter queues (wallet_queue_messages_ready); off disables (env WALLET_QUEUE_POLL_INTERVAL). Default: 15s")
    var queuePollInterval: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        if let location = try storeSetting(store) {
            configuration.store = location
        }
        if noDeclare {
            configuration.declaresTopology = false
        } else if let declare = try setting(nil, "--no-declare", "WALLET_NO_DECLARE", expected: "true or false", bool) {
            configuration.declaresTopology = !declare
        }
        if noMigrate {
            configuration.migratesStore = false
        } else if let migrate = try setting(nil, "--no-migrate", "WALLET_NO_MIGRATE", expected: "true or false", bool) {
            configuration.migratesStore = !migrate
        }
        assign(try setting(prefetch, "--prefetch", "WALLET_PREFETCH", expected: "an integer from 1 to 65535", { UInt16($0) }),
               to: &configuration.prefetch)
        assign(try setting(concurrency, "--concurrency", "WALLET_CONCURRENCY", expected: "a positive integer", positiveInt),
               to: &configuration.concurrency)
        assign(try setting(confirmTimeout, "--confirm-timeout", "WALLET_CONFIRM_TIMEOUT", expected: "a duration like 10s, from 0 to 87600h", duration),
               to: &configuration.confirmTimeout)
        assign(try setting(consumerTimeout, "--consumer-timeout", "WALLET_CONSUMER_TIMEOUT", expected: "a duration like 30m, from 2s to 87600h",
                           { duration($0).flatMap { $0 >= .seconds(2) ? $0 : nil } }),
               to: &configuration.consumerTimeout)
        assign(try setting(storeBusyTimeout, "--store-busy-timeout", "WALLET_STORE_BUSY_TIMEOUT", expected: "a duration like 5s, from 0 to 87600h", duration),
               to: &configuration.storeBusyTimeout)
        assign(try setting(storePoolSize, "--store-pool-size", "WALLET_STORE_POOL_SIZE", expected: "a positive integer", positiveInt),
               to: &configuration.storePoolSize)
        assign(try setting(storeStatementTimeout, "--store-statement-timeout", "WALLET_STORE_STATEMENT_TIMEOUT", expected: "a duration like 5s, from 0 to 87600h", duration),
               to: &configuration.storeStatementTimeout)
        assign(try setting(dedupRetention, "--dedup-retention", "WALLET_DEDUP_RETENTION", expected: "a duration like 24h, from 0 to 87600h", duration),
               to: &configuration.deduplicationRetention)
        assign(try setting(shutdownGrace, "--shutdown-grace", "WALLET_SHUTDOWN_GRACE", expected: "a duration like 25s, from 0 to 87600h", duration),
               to: &configuration.shutdownGracePeriod)
        if let port = try setting(httpPort, "--http-port", "WALLET_HTTP_PORT", expected: "a port number or off", { text -> Int?? in
            text == "off" ? .some(nil) : positiveInt(text).map { .some($0) }
        }) {
            configuration.httpPort = port
        }
        assign(try setting(httpHost, "--http-host", "WALLET_HTTP_HOST", expected: "an address", text), to: &configuration.httpHost)
        if let interval = try setting(
            queuePollInterval, "--queue-poll-interval", "WALLET_QUEUE_POLL_INTERVAL",
            expected: "a duration like 15s, or off", { text -> Duration?? in
                text == "off" ? .some(nil) : duration(text).flatMap { $0 > .zero ? .some($0) : nil }
            })
        {
            configuration.queuePollInterval = interval
        }
    }
}

struct RoutingOptions: ParsableArguments {
    @Option(help: "Largest accepted body in bytes (env WALLET_MAX_BODY_BYTES). Default: 65536")
    var maxBodyBytes: String?
    @Option(help: "Records in a TNS result (env WALLET_HISTORY_LIMIT). Default: 10")
    var historyLimit: String?
    @Option(help: "TNS records window before the newest kept one, e.g. 30d as 720h (env WALLET_HISTORY_WINDOW). Default: 720h")
    var historyWindow: String?
    @Option(help: "numberOfPaymentsLeft after a replenishment (env WALLET_PAYMENT_KEY_BATCH). Default: 10")
    var paymentKeyBatch: String?
    @Option(help: "Validity of replenished keys (env WALLET_PAYMENT_KEY_VALIDITY). Default: 168h")
    var paymentKeyValidity: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        var routing = configuration.routing
        assign(try setting(maxBodyBytes, "--max-body-bytes", "WALLET_MAX_BODY_BYTES", expected: "a positive integer", positiveInt),
               to: &routing.maximumBodyBytes)
        assign(try setting(historyLimit, "--history-limit", "WALLET_HISTORY_LIMIT", expected: "a positive integer", positiveInt),
               to: &routing.transactionHistoryLimit)
        if let window = try setting(historyWindow, "--history-window", "WALLET_HISTORY_WINDOW", expected: "a duration like 720h, from 0 to 87600h", duration) {
            routing.transactionHistoryWindowSeconds = Double(window.components.seconds)
        }
        assign(try setting(paymentKeyBatch, "--payment-key-batch", "WALLET_PAYMENT_KEY_BATCH", expected: "a positive integer", positiveInt),
               to: &routing.paymentKeyBatchSize)
        if let validity = try setting(paymentKeyValidity, "--payment-key-validity", "WALLET_PAYMENT_KEY_VALIDITY", expected: "a duration like 168h, from 0 to 87600h", duration)
        {
            routing.paymentKeyValiditySeconds = Double(validity.components.seconds)
        }
        configuration.routing = routing
    }
}

/// The store of the operators' store commands (`inspect`, `migrate`): the same variables as `run`.
struct StoreToolOptions: ParsableArguments {
    @Option(help: "Store: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE (env WALLET_STORE). Default: sqlite:wallet.sqlite")
    var store: String?
    @Option(help: "PostgreSQL statement timeout, e.g. 5s (env WALLET_STORE_STATEMENT_TIMEOUT). Default: 5s")
    var storeStatementTimeout: String?

    var location: StoreLocation {
        get throws { try storeSetting(store) ?? WorkerConfiguration().store }
    }

    var statementTimeout: Duration {
        get throws {
            try setting(
                storeStatementTimeout, "--store-statement-timeout", "WALLET_STORE_STATEMENT_TIMEOUT",
                expected: "a duration like 5s, from 0 to 87600h", duration) ?? .seconds(5)
        }
    }
}

struct LoggingOptions: ParsableArguments {
    @Option(help: "trace, debug, info, notice, warning, error or critical (env LOG_LEVEL). Default: info")
    var logLevel: String?
    @Option(help: "text or json (env LOG_FORMAT). Default: text")
    var logFormat: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        assign(try setting(logLevel, "--log-level", "LOG_LEVEL", expected: "trace, debug, info, notice, warning, error or critical",
                           { Logger.Level(rawValue: $0.lowercased()) }), to: &configuration.logLevel)
        assign(try setting(logFormat, "--log-format", "LOG_FORMAT", expected: "text or json", { LogFormat(rawValue: $0.lowercased()) }),
               to: &configuration.logFormat)
    }
}

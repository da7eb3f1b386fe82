import AMQPTransport
import Logging
import WalletRouting
import WalletStore

/// Everything the worker needs to run, with the contract's defaults (CONTRACT.md §1, §8, §10).
/// The `wallet-worker` command fills it from flags, then environment variables, then these defaults.
public struct WorkerConfiguration: Sendable {
    /// The broker. Default: `amqp://guest:guest@127.0.0.1:5672/%2f`.
    public var amqpURL: String = "amqp://guest:guest@127.0.0.1:5672/%2f"
    /// TLS files for `amqps://` URLs. Default: no CA file (the system's bundle: `SSL_CERT_FILE`, else the
    /// distribution's PEM bundle, see `AMQPConnectionConfiguration.TLS.caCertificatePath`), no client certificate.
    public var tls = AMQPConnectionConfiguration.TLS()
    /// AMQP heartbeat: a silent broker is declared lost after about twice this. Default: `10 s`.
    public var heartbeat: Duration = .seconds(10)
    /// Queue and exchange names (CONTRACT.md §1), and the ordered mode (`topology.orderedShards`, default off).
    public var topology = Topology()
    /// Declare the topology at start-up and after every reconnect. Off (`--no-declare`) for a broker user without
    /// `configure` rights: a deploy job runs `wallet-worker declare` with one that has them. Default: `true`.
    public var declaresTopology = true
    /// Migrate the store's schema at start-up. Off (`--no-migrate`) for a database user without DDL rights: the
    /// worker then refuses to start unless the schema is exactly this build's, and a deploy job runs
    /// `wallet-worker migrate`. Default: `true`.
    public var migratesStore = true
    /// Unacknowledged deliveries the broker sends each consumer: the largest batch. Default: `200`.
    public var prefetch: UInt16 = 200
    /// Independent consume-process-publish pipelines on the work queue, each with its own two connections.
    /// More than 1 gives up queue order. Does not apply in the ordered mode (one pipeline per shard). Default: `1`.
    public var concurrency = 1
    /// Where state and processed message ids live. Default: `sqlite:wallet.sqlite`.
    public var store: StoreLocation = .sqlite(path: "wallet.sqlite")
    /// How long a store write waits for a lock before the batch counts as a transient failure. Default: `5 s`.
    public var storeBusyTimeout: Duration = .seconds(5)
    /// PostgreSQL: connections this process opens at most (the pipelines and the retention sweep share them).
    /// Default: `4`.
    public var storePoolSize = 4
    /// PostgreSQL: longest a statement may run, lock waits included; also the wait for a pooled connection
    /// (at least 1 s).
    /// Default: `5 s`.
    public var storeStatementTimeout: Duration = .seconds(5)
    /// How long processed message ids are remembered for deduplication. Default: `24 h`.
    public var deduplicationRetention: Duration = .seconds(86_400)
    /// Time a message spends in the retry queue before it is processed again the first time; it doubles with
    /// each further retry (`RetrySchedule`). Default: `5 s`.
    public var retryDelay: Duration = .seconds(5)
    /// The longest wait between two attempts of one message. Default: `nil`, the larger of
    /// `defaultLongestRetryDelay` (5 minutes) and `retryDelay`.
    public var longestRetryDelay: Duration?
    public static let defaultLongestRetryDelay: Duration = .seconds(300)
    /// Processing attempts before a transient failure dead-letters the message. Default: `5`.
    public var retryAttempts = 5
    /// How long a publish batch waits for the broker's confirms before it counts as failed. Default: `10 s`.
    public var confirmTimeout: Duration = .seconds(10)
    /// The broker's `consumer_timeout`: how long it lets a consumer hold a delivery unacknowledged before it closes
    /// the channel (RabbitMQ's own default is 30 minutes). Deliveries held while the store is out are given back to
    /// the queue at half of it, and the pipeline pauses until the store answers. Default: `30 m`.
    public var consumerTimeout: Duration = .seconds(1_800)
    /// The results pause (`ResultsKillSwitch`): how far back it looks, and how long a trial waits for a verdict.
    /// Default: `10 s`.
    public var resultsPauseWindow: Duration = .seconds(10)
    /// Distinct messages whose results were refused in the window before the pause is considered. Default: `10`.
    public var resultsPauseActivation = 10
    /// The share of the window's deliveries whose results were refused that pauses the worker. Default: `0.5`.
    public var resultsPauseRatio = 0.5
    /// Distinct messages refused since results were last taken before a last attempt refused pauses the worker
    /// instead of being dead-lettered (`ResultsKillSwitch.lastAttemptRefused`); 0: never. Default: `2`.
    public var resultsPauseQuietActivation = 2
    /// Time allowed after SIGTERM to finish the batch in hand and exit. Default: `25 s` (Kubernetes gives 30 s).
    public var shutdownGracePeriod: Duration = .seconds(25)
    /// First and largest pause between reconnection attempts (exponential, with full jitter).
    /// Default: `0.5 s` and `30 s`.
    public var reconnectBackoff = ReconnectBackoff()
    /// The operations endpoint (`/healthz`, `/readyz`, `/metrics`); `nil` turns it off. Default: `9090`.
    public var httpPort: Int? = 9090
    /// Address the operations endpoint listens on. Default: `0.0.0.0`.
    public var httpHost = "0.0.0.0"
    /// How often the broker is asked for the depth of the work, retry and dead-letter queues
    /// (`wallet_queue_messages_ready`); `nil` turns the polling off. Default: `15 s`.
    public var queuePollInterval: Duration? = .seconds(15)
    /// The routing core's limits and the result exchanges (kept in step with `topology`).
    public var routing = RoutingSettings()
    public var logLevel: Logger.Level = .info
    /// OpenTelemetry tracing, from the `OTEL_*` environment (`TracingSettings(environment:)`). Default: off.
    public var tracing = TracingSettings.off
    public var logFormat: LogFormat = .text
    /// How often a storm of the same warning is summarised (`WarningStorms`). Not a setting: the in-process tests
    /// move it out of the way of the timers they step through. Default: `60 s`.
    var warningSummaryInterval: Duration = .seconds(60)

    public init() {}

    /// The waits between the attempts of a message that fails transiently, and the retry queues they need.
    public var retrySchedule: RetrySchedule {
        RetrySchedule(
            firstDelay: retryDelay, longestDelay: longestRetryDelay ?? max(Self.defaultLongestRetryDelay, retryDelay),
            attempts: retryAttempts)
    }

    /// How long deliveries may be held while the store is out: half the broker's consumer timeout, so they are given
    /// back before the broker times them out (it checks about once a minute).
    var storeHoldLimit: Duration { consumerTimeout / 2 }

    /// The routing settings with the result exchange names taken from the topology.
    var routingSettings: RoutingSettings {
        var settings = routing
        settings.exchanges = topology.resultExchanges
        return settings
    }
}

/// How log lines are written.
public enum LogFormat: String, Sendable, CaseIterable {
    /// One human-readable line per event.
    case text
    /// One JSON object per line, for log collectors.
    case json
}

/// Exponential backoff with full jitter between reconnection attempts.
public struct ReconnectBackoff: Sendable, Hashable {
    /// Default: `0.5 s`.
    public var initial: Duration = .milliseconds(500)
    /// Default: `30 s`.
    public var maximum: Duration = .seconds(30)

    public init() {}

    /// The pause before attempt `attempt` (1-based): uniformly random up to min(maximum, initial × 2^(attempt-1)).
    func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceiling = min(maximum, initial * Double(1 << min(max(attempt - 1, 0), 30)))
        let fraction = Double.random(in: 0...1, using: &generator)
        return ceiling * fraction
    }
}

import ArgumentParser
import Foundation
import Logging
import WalletRouting
import WalletStore
import WalletWorker

// The flags of `run`, grouped as the commands take them. Each option is a setting of the table (`Setting`,
// Sources/WalletWorker/Settings/SettingsTable.swift), which gives its flag and help; each group lists its options
// with their entries (`givenSettings`), and `apply(to:)` (SettingOptions.swift) resolves each from the same entry
// (the flag, then the variable, then its `_FILE`, then the default of `WorkerConfiguration`). The property names are
// the `<value>` names of `--help`.

struct BrokerOptions: SettingOptions {
    @Option(Setting.amqpURL) var amqpUrl: String?
    @Option(Setting.tlsCAFile) var tlsCaFile: String?
    @Option(Setting.tlsCertFile) var tlsCertFile: String?
    @Option(Setting.tlsKeyFile) var tlsKeyFile: String?
    @Option(Setting.heartbeat) var heartbeat: String?
    @Option(Setting.inboundExchange) var inboundExchange: String?
    @Option(Setting.workQueue) var workQueue: String?
    @Option(Setting.queueType) var queueType: String?
    @Option(Setting.deliveryLimit) var deliveryLimit: String?
    @Option(Setting.retryQueue) var retryQueue: String?
    @Option(Setting.orderedShards) var orderedShards: String?
    @Option(Setting.retryDelay) var retryDelay: String?
    @Option(Setting.retryDelayMax) var retryDelayMax: String?
    @Option(Setting.retryAttempts) var retryAttempts: String?
    @Option(Setting.deadLetterExchange) var deadLetterExchange: String?
    @Option(Setting.deadLetterQueue) var deadLetterQueue: String?
    @Option(Setting.eventsExchange) var eventsExchange: String?
    @Option(Setting.transactionsExchange) var transactionsExchange: String?
    @Option(Setting.replenishmentExchange) var replenishmentExchange: String?
    @Option(Setting.actionsExchange) var actionsExchange: String?
    @Option(Setting.installationsExchange) var installationsExchange: String?

    var givenSettings: [(any ConfigurationSetting, String?)] {
        [
            (Setting.amqpURL, amqpUrl),
            (Setting.tlsCAFile, tlsCaFile),
            (Setting.tlsCertFile, tlsCertFile),
            (Setting.tlsKeyFile, tlsKeyFile),
            (Setting.heartbeat, heartbeat),
            (Setting.inboundExchange, inboundExchange),
            (Setting.workQueue, workQueue),
            (Setting.queueType, queueType),
            (Setting.deliveryLimit, deliveryLimit),
            (Setting.retryQueue, retryQueue),
            (Setting.orderedShards, orderedShards),
            (Setting.retryDelay, retryDelay),
            (Setting.retryDelayMax, retryDelayMax),
            (Setting.retryAttempts, retryAttempts),
            (Setting.deadLetterExchange, deadLetterExchange),
            (Setting.deadLetterQueue, deadLetterQueue),
            (Setting.eventsExchange, eventsExchange),
            (Setting.transactionsExchange, transactionsExchange),
            (Setting.replenishmentExchange, replenishmentExchange),
            (Setting.actionsExchange, actionsExchange),
            (Setting.installationsExchange, installationsExchange),
        ]
    }
}

struct WorkerOptions: SettingOptions {
    @Option(Setting.store) var store: String?
    @Flag(Setting.noDeclare) var noDeclare = false
    @Flag(Setting.noMigrate) var noMigrate = false
    @Option(Setting.prefetch) var prefetch: String?
    @Option(Setting.concurrency) var concurrency: String?
    @Option(Setting.confirmTimeout) var confirmTimeout: String?
    @Option(Setting.resultsPauseWindow) var resultsPauseWindow: String?
    @Option(Setting.resultsPauseActivation) var resultsPauseActivation: String?
    @Option(Setting.resultsPauseRatio) var resultsPauseRatio: String?
    @Option(Setting.resultsPauseQuietActivation) var resultsPauseQuietActivation: String?
    @Option(Setting.consumerTimeout) var consumerTimeout: String?
    @Option(Setting.storeBusyTimeout) var storeBusyTimeout: String?
    @Option(Setting.storePoolSize) var storePoolSize: String?
    @Option(Setting.storeStatementTimeout) var storeStatementTimeout: String?
    @Option(Setting.dedupRetention) var dedupRetention: String?
    @Option(Setting.shutdownGrace) var shutdownGrace: String?
    @Option(Setting.httpPort) var httpPort: String?
    @Option(Setting.httpHost) var httpHost: String?
    @Option(Setting.queuePollInterval) var queuePollInterval: String?

    var givenSettings: [(any ConfigurationSetting, String?)] {
        [
            (Setting.store, store),
            (Setting.noDeclare, noDeclare ? "true" : nil),
            (Setting.noMigrate, noMigrate ? "true" : nil),
            (Setting.prefetch, prefetch),
            (Setting.concurrency, concurrency),
            (Setting.confirmTimeout, confirmTimeout),
            (Setting.resultsPauseWindow, resultsPauseWindow),
            (Setting.resultsPauseActivation, resultsPauseActivation),
            (Setting.resultsPauseRatio, resultsPauseRatio),
            (Setting.resultsPauseQuietActivation, resultsPauseQuietActivation),
            (Setting.consumerTimeout, consumerTimeout),
            (Setting.storeBusyTimeout, storeBusyTimeout),
            (Setting.storePoolSize, storePoolSize),
            (Setting.storeStatementTimeout, storeStatementTimeout),
            (Setting.dedupRetention, dedupRetention),
            (Setting.shutdownGrace, shutdownGrace),
            (Setting.httpPort, httpPort),
            (Setting.httpHost, httpHost),
            (Setting.queuePollInterval, queuePollInterval),
        ]
    }
}

struct RoutingOptions: SettingOptions {
    @Option(Setting.maxBodyBytes) var maxBodyBytes: String?
    @Option(Setting.historyLimit) var historyLimit: String?
    @Option(Setting.historyWindow) var historyWindow: String?
    @Option(Setting.paymentKeyBatch) var paymentKeyBatch: String?
    @Option(Setting.paymentKeyValidity) var paymentKeyValidity: String?

    var givenSettings: [(any ConfigurationSetting, String?)] {
        [
            (Setting.maxBodyBytes, maxBodyBytes),
            (Setting.historyLimit, historyLimit),
            (Setting.historyWindow, historyWindow),
            (Setting.paymentKeyBatch, paymentKeyBatch),
            (Setting.paymentKeyValidity, paymentKeyValidity),
        ]
    }
}

/// The store of the operators' store commands (`inspect`, `migrate`): the same variables and defaults as `run`.
struct StoreToolOptions: ParsableArguments {
    @Option(
        name: .customLong(Setting.store.name),
        help: .init(
            Setting.store.setting.help(
                summary: "Store: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                default: Setting.store.defaultValue)))
    var store: String?
    @Option(
        name: .customLong(Setting.storeStatementTimeout.name),
        help: .init(
            Setting.storeStatementTimeout.setting.help(
                summary: "PostgreSQL statement timeout, e.g. 5s", default: Setting.storeStatementTimeout.defaultValue)))
    var storeStatementTimeout: String?
    @OptionGroup var logging: ToolLoggingOptions

    var location: StoreLocation {
        get throws { try setting(store, Setting.store) ?? WorkerConfiguration().store }
    }

    var statementTimeout: Duration {
        get throws {
            try setting(storeStatementTimeout, Setting.storeStatementTimeout)
                ?? WorkerConfiguration().storeStatementTimeout
        }
    }
}

struct LoggingOptions: SettingOptions {
    @Option(Setting.logLevel) var logLevel: String?
    @Option(Setting.logFormat) var logFormat: String?

    var givenSettings: [(any ConfigurationSetting, String?)] {
        [
            (Setting.logLevel, logLevel),
            (Setting.logFormat, logFormat),
        ]
    }
}

/// `--log-level` and `--log-format` of a one-shot command (`migrate`, `inspect`, `route`, `dead-letters`): the
/// settings of `run` (with their variables, `LOG_LEVEL` and `LOG_FORMAT`), but at warning by default: a tool prints
/// its answer on stdout, and its log on stderr says only what went wrong unless asked for more.
struct ToolLoggingOptions: ParsableArguments {
    @Option(
        name: .customLong(Setting.logLevel.name),
        help: .init(
            Setting.logLevel.setting.help(
                summary: "Log level of the command's own log (stderr): trace, debug, info, notice, warning, error, "
                    + "critical", default: "warning")))
    var logLevel: String?
    @Option(
        name: .customLong(Setting.logFormat.name),
        help: .init(
            Setting.logFormat.setting.help(
                summary: "Log format: text or json (one object per line)", default: Setting.logFormat.defaultValue)))
    var logFormat: String?

    /// Starts logging as the flags (else the variables) say; `configuration` names the secrets to redact.
    func bootstrap(redacting configuration: WorkerConfiguration) throws {
        WorkerLogging.bootstrap(
            format: try setting(logFormat, Setting.logFormat) ?? WorkerConfiguration().logFormat,
            level: try setting(logLevel, Setting.logLevel) ?? .warning,
            secrets: SecretRedaction.of(configuration, environment: ProcessInfo.processInfo.environment))
    }

    /// The same, for a command that has a store's location and no other setting.
    func bootstrap(redactingStore location: StoreLocation) throws {
        var configuration = WorkerConfiguration()
        configuration.store = location
        try bootstrap(redacting: configuration)
    }
}

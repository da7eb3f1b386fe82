import ArgumentParser
import Logging
import WalletRouting
import WalletStore
import WalletWorker

// The flags of `run`, grouped as the commands take them. Each option's name and help come from the settings table
// (`Setting`, Sources/WalletWorker/Settings/SettingsTable.swift), and `apply(to:)` resolves it from the same entry
// (`Settings.swift`: the flag, then the variable, then its `_FILE`, then the default of `WorkerConfiguration`).
// The property names are the `<value>` names of `--help`.

struct BrokerOptions: ParsableArguments {
    @Option(name: .customLong(Setting.amqpURL.name), help: .init(Setting.amqpURL))
    var amqpURL: String?
    @Option(name: .customLong(Setting.tlsCAFile.name), help: .init(Setting.tlsCAFile))
    var tlsCaFile: String?
    @Option(name: .customLong(Setting.tlsCertFile.name), help: .init(Setting.tlsCertFile))
    var tlsCertFile: String?
    @Option(name: .customLong(Setting.tlsKeyFile.name), help: .init(Setting.tlsKeyFile))
    var tlsKeyFile: String?
    @Option(name: .customLong(Setting.heartbeat.name), help: .init(Setting.heartbeat))
    var heartbeat: String?
    @Option(name: .customLong(Setting.inboundExchange.name), help: .init(Setting.inboundExchange))
    var inboundExchange: String?
    @Option(name: .customLong(Setting.workQueue.name), help: .init(Setting.workQueue))
    var workQueue: String?
    @Option(name: .customLong(Setting.queueType.name), help: .init(Setting.queueType))
    var queueType: String?
    @Option(name: .customLong(Setting.deliveryLimit.name), help: .init(Setting.deliveryLimit))
    var deliveryLimit: String?
    @Option(name: .customLong(Setting.retryQueue.name), help: .init(Setting.retryQueue))
    var retryQueue: String?
    @Option(name: .customLong(Setting.orderedShards.name), help: .init(Setting.orderedShards))
    var orderedShards: String?
    @Option(name: .customLong(Setting.retryDelay.name), help: .init(Setting.retryDelay))
    var retryDelay: String?
    @Option(name: .customLong(Setting.retryDelayMax.name), help: .init(Setting.retryDelayMax))
    var retryDelayMax: String?
    @Option(name: .customLong(Setting.retryAttempts.name), help: .init(Setting.retryAttempts))
    var retryAttempts: String?
    @Option(name: .customLong(Setting.deadLetterExchange.name), help: .init(Setting.deadLetterExchange))
    var deadLetterExchange: String?
    @Option(name: .customLong(Setting.deadLetterQueue.name), help: .init(Setting.deadLetterQueue))
    var deadLetterQueue: String?
    @Option(name: .customLong(Setting.eventsExchange.name), help: .init(Setting.eventsExchange))
    var eventsExchange: String?
    @Option(name: .customLong(Setting.transactionsExchange.name), help: .init(Setting.transactionsExchange))
    var transactionsExchange: String?
    @Option(name: .customLong(Setting.replenishmentExchange.name), help: .init(Setting.replenishmentExchange))
    var replenishmentExchange: String?
    @Option(name: .customLong(Setting.actionsExchange.name), help: .init(Setting.actionsExchange))
    var actionsExchange: String?
    @Option(name: .customLong(Setting.installationsExchange.name), help: .init(Setting.installationsExchange))
    var installationsExchange: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        assign(try setting(amqpURL, Setting.amqpURL), to: &configuration.amqpURL)
        configuration.tls.caCertificatePath = try setting(tlsCaFile, Setting.tlsCAFile)
        configuration.tls.clientCertificatePath = try setting(tlsCertFile, Setting.tlsCertFile)
        configuration.tls.clientKeyPath = try setting(tlsKeyFile, Setting.tlsKeyFile)
        assign(try setting(heartbeat, Setting.heartbeat), to: &configuration.heartbeat)
        var topology = configuration.topology
        assign(try setting(inboundExchange, Setting.inboundExchange), to: &topology.inboundExchange)
        assign(try setting(workQueue, Setting.workQueue), to: &topology.workQueue)
        assign(try setting(queueType, Setting.queueType), to: &topology.workQueueType)
        assign(try setting(deliveryLimit, Setting.deliveryLimit), to: &topology.deliveryLimit)
        assign(try setting(retryQueue, Setting.retryQueue), to: &topology.retryQueue)
        assign(try setting(orderedShards, Setting.orderedShards), to: &topology.orderedShards)
        assign(try setting(retryDelay, Setting.retryDelay), to: &configuration.retryDelay)
        configuration.longestRetryDelay = try setting(retryDelayMax, Setting.retryDelayMax)
        assign(try setting(retryAttempts, Setting.retryAttempts), to: &configuration.retryAttempts)
        assign(try setting(deadLetterExchange, Setting.deadLetterExchange), to: &topology.deadLetterExchange)
        assign(try setting(deadLetterQueue, Setting.deadLetterQueue), to: &topology.deadLetterQueue)
        var exchanges = topology.resultExchanges
        assign(try setting(eventsExchange, Setting.eventsExchange), to: &exchanges.events)
        assign(try setting(transactionsExchange, Setting.transactionsExchange), to: &exchanges.transactions)
        assign(try setting(replenishmentExchange, Setting.replenishmentExchange), to: &exchanges.replenishment)
        assign(try setting(actionsExchange, Setting.actionsExchange), to: &exchanges.actions)
        assign(try setting(installationsExchange, Setting.installationsExchange), to: &exchanges.installations)
        topology.resultExchanges = exchanges
        configuration.topology = topology
    }
}

struct WorkerOptions: ParsableArguments {
    @Option(name: .customLong(Setting.store.name), help: .init(Setting.store))
    var store: String?
    @Flag(name: .customLong(Setting.noDeclare.name), help: .init(Setting.noDeclare))
    var noDeclare = false
    @Flag(name: .customLong(Setting.noMigrate.name), help: .init(Setting.noMigrate))
    var noMigrate = false
    @Option(name: .customLong(Setting.prefetch.name), help: .init(Setting.prefetch))
    var prefetch: String?
    @Option(name: .customLong(Setting.concurrency.name), help: .init(Setting.concurrency))
    var concurrency: String?
    @Option(name: .customLong(Setting.confirmTimeout.name), help: .init(Setting.confirmTimeout))
    var confirmTimeout: String?
    @Option(name: .customLong(Setting.consumerTimeout.name), help: .init(Setting.consumerTimeout))
    var consumerTimeout: String?
    @Option(name: .customLong(Setting.storeBusyTimeout.name), help: .init(Setting.storeBusyTimeout))
    var storeBusyTimeout: String?
    @Option(name: .customLong(Setting.storePoolSize.name), help: .init(Setting.storePoolSize))
    var storePoolSize: String?
    @Option(name: .customLong(Setting.storeStatementTimeout.name), help: .init(Setting.storeStatementTimeout))
    var storeStatementTimeout: String?
    @Option(name: .customLong(Setting.dedupRetention.name), help: .init(Setting.dedupRetention))
    var dedupRetention: String?
    @Option(name: .customLong(Setting.shutdownGrace.name), help: .init(Setting.shutdownGrace))
    var shutdownGrace: String?
    @Option(name: .customLong(Setting.httpPort.name), help: .init(Setting.httpPort))
    var httpPort: String?
    @Option(name: .customLong(Setting.httpHost.name), help: .init(Setting.httpHost))
    var httpHost: String?
    @Option(name: .customLong(Setting.queuePollInterval.name), help: .init(Setting.queuePollInterval))
    var queuePollInterval: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        if let location = try storeSetting(store) {
            configuration.store = location
        }
        if noDeclare {
            configuration.declaresTopology = false
        } else if let declare = try setting(nil, Setting.noDeclare) {
            configuration.declaresTopology = !declare
        }
        if noMigrate {
            configuration.migratesStore = false
        } else if let migrate = try setting(nil, Setting.noMigrate) {
            configuration.migratesStore = !migrate
        }
        assign(try setting(prefetch, Setting.prefetch), to: &configuration.prefetch)
        assign(try setting(concurrency, Setting.concurrency), to: &configuration.concurrency)
        assign(try setting(confirmTimeout, Setting.confirmTimeout), to: &configuration.confirmTimeout)
        assign(try setting(consumerTimeout, Setting.consumerTimeout), to: &configuration.consumerTimeout)
        assign(try setting(storeBusyTimeout, Setting.storeBusyTimeout), to: &configuration.storeBusyTimeout)
        assign(try setting(storePoolSize, Setting.storePoolSize), to: &configuration.storePoolSize)
        assign(
            try setting(storeStatementTimeout, Setting.storeStatementTimeout), to: &configuration.storeStatementTimeout)
        assign(try setting(dedupRetention, Setting.dedupRetention), to: &configuration.deduplicationRetention)
        assign(try setting(shutdownGrace, Setting.shutdownGrace), to: &configuration.shutdownGracePeriod)
        assign(try setting(httpPort, Setting.httpPort), to: &configuration.httpPort)
        assign(try setting(httpHost, Setting.httpHost), to: &configuration.httpHost)
        assign(try setting(queuePollInterval, Setting.queuePollInterval), to: &configuration.queuePollInterval)
    }
}

struct RoutingOptions: ParsableArguments {
    @Option(name: .customLong(Setting.maxBodyBytes.name), help: .init(Setting.maxBodyBytes))
    var maxBodyBytes: String?
    @Option(name: .customLong(Setting.historyLimit.name), help: .init(Setting.historyLimit))
    var historyLimit: String?
    @Option(name: .customLong(Setting.historyWindow.name), help: .init(Setting.historyWindow))
    var historyWindow: String?
    @Option(name: .customLong(Setting.paymentKeyBatch.name), help: .init(Setting.paymentKeyBatch))
    var paymentKeyBatch: String?
    @Option(name: .customLong(Setting.paymentKeyValidity.name), help: .init(Setting.paymentKeyValidity))
    var paymentKeyValidity: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        var routing = configuration.routing
        assign(try setting(maxBodyBytes, Setting.maxBodyBytes), to: &routing.maximumBodyBytes)
        assign(try setting(historyLimit, Setting.historyLimit), to: &routing.transactionHistoryLimit)
        if let window = try setting(historyWindow, Setting.historyWindow) {
            routing.transactionHistoryWindowSeconds = Double(window.components.seconds)
        }
        assign(try setting(paymentKeyBatch, Setting.paymentKeyBatch), to: &routing.paymentKeyBatchSize)
        if let validity = try setting(paymentKeyValidity, Setting.paymentKeyValidity) {
            routing.paymentKeyValiditySeconds = Double(validity.components.seconds)
        }
        configuration.routing = routing
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

    var location: StoreLocation {
        get throws { try storeSetting(store) ?? WorkerConfiguration().store }
    }

    var statementTimeout: Duration {
        get throws {
            try setting(storeStatementTimeout, Setting.storeStatementTimeout)
                ?? WorkerConfiguration().storeStatementTimeout
        }
    }
}

struct LoggingOptions: ParsableArguments {
    @Option(name: .customLong(Setting.logLevel.name), help: .init(Setting.logLevel))
    var logLevel: String?
    @Option(name: .customLong(Setting.logFormat.name), help: .init(Setting.logFormat))
    var logFormat: String?

    func apply(to configuration: inout WorkerConfiguration) throws {
        assign(try setting(logLevel, Setting.logLevel), to: &configuration.logLevel)
        assign(try setting(logFormat, Setting.logFormat), to: &configuration.logFormat)
    }
}

extension ArgumentHelp {
    /// A setting's help: its summary, its variable and its default, from the settings table.
    init<Value>(_ setting: Setting.Typed<Value>) {
        self.init(setting.help)
    }
}

// swift-tools-version:6.1
import PackageDescription

// Swift 6 language mode (the default for tools 6.x) turns on complete strict concurrency checking for every target.
let package = Package(
    name: "wallet-notification-worker",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "AMQPTransport", targets: ["AMQPTransport"]),
        .library(name: "WalletRouting", targets: ["WalletRouting"]),
        .library(name: "WalletStore", targets: ["WalletStore"]),
        .library(name: "WalletWorker", targets: ["WalletWorker"]),
        .library(name: "WalletOperatorTools", targets: ["WalletOperatorTools"]),
        .executable(name: "wallet-worker", targets: ["wallet-worker"]),
    ],
    traits: [
        // On by default. `--disable-default-traits` builds the worker without its OTLP/HTTP client (OTEL_* then stops
        // it at start; the tracer and the encoders are built either way).
        .trait(name: "OpenTelemetry", description: "OTLP/HTTP export of the worker's spans (AsyncHTTPClient)"),
        .default(enabledTraits: ["OpenTelemetry"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Tracing (off unless the OTEL_* environment turns it on): the worker's own tracer and OTLP encoders
        // (Sources/WalletWorker/Tracing), posted to the collector over OTLP/HTTP with AsyncHTTPClient.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    ],
    targets: [
        // A lock ThreadSanitizer sees (a pthread mutex), for the code CI runs under it: the transport and its test kits.
        .target(name: "Locking"),

        // MARK: - The C boundary (only AMQPTransport may import these)
        .systemLibrary(
            name: "CRabbitMQ",
            pkgConfig: "librabbitmq",
            providers: [.apt(["librabbitmq-dev"]), .brew(["rabbitmq-c"])]
        ),
        .target(
            name: "CRabbitMQShims",
            dependencies: ["CRabbitMQ"]
        ),
        .target(
            name: "AMQPTransport",
            dependencies: [
                "CRabbitMQ",
                "CRabbitMQShims",
                "Locking",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: - The pure routing core (no I/O)
        .target(name: "WalletRouting"),

        // MARK: - The store: effects and processed message ids, one transaction per batch
        .target(
            name: "WalletStore",
            dependencies: [
                "WalletRouting",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The C API, for binding and reading the batch's hot statements (SQLite/DirectStatement.swift).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // Imported directly: the PostgreSQL connection's logger, event loop and TLS configuration.
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),

        // MARK: - The message vocabulary: the headers the worker writes and reads, x-death, a message's original
        // destination, the dead-letter queue's loop. The worker and the operators' tools both depend on it, and on
        // nothing of each other:
        //
        //   AMQPTransport <- WalletMessages <- WalletWorker ----------+
        //                                  <- WalletOperatorTools <---+- wallet-worker (the wiring)
        .target(name: "WalletMessages", dependencies: ["AMQPTransport"]),

        // MARK: - The worker: configuration, topology, the processing loop, operations
        .target(
            name: "WalletWorker",
            dependencies: [
                "AMQPTransport",
                "WalletMessages",
                "WalletRouting",
                "WalletStore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(
                    name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["OpenTelemetry"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["OpenTelemetry"])),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),

        // MARK: - The operators' tools: dead letters, inspecting the store, routing without a broker
        .target(
            name: "WalletOperatorTools",
            dependencies: [
                "AMQPTransport",
                "WalletMessages",
                "WalletRouting",
                "WalletStore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: - Executables
        .executableTarget(
            name: "wallet-worker",
            dependencies: [
                "AMQPTransport",
                "WalletRouting",
                "WalletStore",
                "WalletWorker",
                "WalletOperatorTools",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "wallet-notify",
            dependencies: [
                "AMQPTransport", "WalletRouting", "WalletWorker", "WalletOperatorTools",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "amqp-demo",
            dependencies: ["AMQPTransport", .product(name: "Logging", package: "swift-log")]
        ),

        // MARK: - Tests
        // Helpers shared by the test targets (a deterministic random generator, loopback sockets, a faulty relay, the
        // one polling helper `eventually`, a log capture).
        .target(
            name: "TestSupport", dependencies: ["Locking", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TestSupport"),
        // The integration tests' one broker kit: connections, a topology per test, queue capture.
        .target(
            name: "BrokerTestSupport",
            dependencies: [
                "AMQPTransport", "Locking", "TestSupport", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/BrokerTestSupport"
        ),
        // The tests' PostgreSQL server: a schema or a database of a test's own, the tests' own connection.
        .target(
            name: "PostgresTestSupport",
            dependencies: [
                "WalletStore", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/PostgresTestSupport"
        ),
        .testTarget(
            name: "WalletRoutingTests",
            dependencies: [
                "WalletRouting", "TestSupport", .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            resources: [.copy("Golden")]
        ),
        .testTarget(
            name: "WalletStoreTests",
            dependencies: [
                "WalletStore", "WalletRouting", "TestSupport", "PostgresTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "WalletWorkerTests",
            dependencies: [
                "WalletWorker", "WalletMessages", "WalletStore", "WalletRouting", "AMQPTransport", "TestSupport",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                // The in-process worker runs in a ServiceGroup, as in production (Executor/InProcessWorker.swift).
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                // The operations endpoint's deadlines on an EmbeddedChannel, its clock turned by hand.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            // The OTLP/HTTP transport's tests exist only where the transport does.
            swiftSettings: [.define("OpenTelemetry", .when(traits: ["OpenTelemetry"]))]
        ),
        // The `wallet-worker` command's options against the settings table (the executable's module, @testable).
        .testTarget(
            name: "WalletWorkerCommandTests",
            dependencies: [
                "wallet-worker", "WalletWorker", "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "WalletOperatorToolsTests",
            dependencies: ["WalletOperatorTools", "WalletMessages", "WalletStore", "WalletRouting", "AMQPTransport"]
        ),
        .testTarget(
            name: "WalletWorkerIntegrationTests",
            dependencies: [
                "WalletWorker",
                "WalletOperatorTools",
                "WalletStore",
                "WalletRouting",
                "AMQPTransport",
                "wallet-worker",
                // Built for the tests that run it (`wallet-notify --help`).
                "wallet-notify",
                "TestSupport",
                "BrokerTestSupport",
                "PostgresTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The multi-replica tests create a database each and read the store's tables.
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "AMQPTransportTests",
            dependencies: ["AMQPTransport", "Locking"]
        ),
        .testTarget(
            name: "AMQPTransportIntegrationTests",
            dependencies: [
                "AMQPTransport", "Locking", "TestSupport", "BrokerTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

// MARK: - Our modules optimized in debug builds too
//
// The tests start about 480 worker and tool processes and move hundreds of thousands of messages through them: built
// -Onone, those processes took 134 s of a test run's 457 s of CPU (docs/testing.md, "What the time is made of"). Our
// modules are built -O in debug builds as well, with assertions kept (`-assert-config Debug`), so the tests run code
// compiled the way the shipped binary is; the dependencies and the test targets stay as SwiftPM builds them. Release
// builds are unchanged. `WALLET_UNOPTIMIZED=1 swift build` builds our modules -Onone again, for a debugger.
let optimizedInDebug = [
    "Locking", "AMQPTransport", "WalletMessages", "WalletRouting", "WalletStore", "WalletWorker",
    "WalletOperatorTools", "wallet-worker", "wallet-notify", "amqp-demo",
]
if Context.environment["WALLET_UNOPTIMIZED"] != "1" {
    for target in package.targets where optimizedInDebug.contains(target.name) {
        target.swiftSettings =
            (target.swiftSettings ?? [])
            + [.unsafeFlags(["-O", "-assert-config", "Debug"], .when(configuration: .debug))]
    }
}

// MARK: - The transport alone
//
// `WALLET_TRANSPORT_ONLY=1` keeps the transport, its C boundary and what its tests need, and drops every other
// target: .ci/run's ThreadSanitizer step builds the transport's tests under the sanitizer without the store's and
// the worker's dependencies (GRDB, PostgresNIO, SwiftNIO, BoringSSL), which it does not test: 75 s to build here
// instead of 614 s for the whole package (2026-12-01). SwiftPM warns that the other dependencies are not used: they
// stay declared, so that Package.resolved stays the same file.
if Context.environment["WALLET_TRANSPORT_ONLY"] == "1" {
    let transport: Set<String> = [
        "Locking", "CRabbitMQ", "CRabbitMQShims", "AMQPTransport", "TestSupport", "BrokerTestSupport",
        "AMQPTransportTests", "AMQPTransportIntegrationTests",
    ]
    package.targets.removeAll { !transport.contains($0.name) }
    package.products.removeAll { product in
        switch product {
        case let library as Product.Library: !library.targets.allSatisfy(transport.contains)
        case let executable as Product.Executable: !executable.targets.allSatisfy(transport.contains)
        default: true
        }
    }
}

// swift-tools-version:6.1
import PackageDescription

// Swift 6 language mode (the default for tools 6.x) turns on complete strict concurrency checking for every target.
let package = Package(
    name: "wallet-notification-worker",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "AMQPTransport", targets: ["AMQPTransport"]),
        .library(name: "WalletRouting", targets: ["WalletRouting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
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
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: - The pure routing core (no I/O)
        .target(name: "WalletRouting"),

        // MARK: - Executables
        .executableTarget(
            name: "amqp-demo",
            dependencies: ["AMQPTransport", .product(name: "Logging", package: "swift-log")]
        ),

        // MARK: - Tests
        .testTarget(
            name: "WalletRoutingTests",
            dependencies: ["WalletRouting", .product(name: "PropertyBased", package: "swift-property-based")],
            resources: [.copy("Golden")]
        ),
        .testTarget(
            name: "AMQPTransportTests",
            dependencies: ["AMQPTransport"]
        ),
        .testTarget(
            name: "AMQPTransportIntegrationTests",
            dependencies: ["AMQPTransport", .product(name: "Logging", package: "swift-log")]
        ),
    ]
)

// swift-tools-version:6.1
import PackageDescription

// The benchmarks live in its own package so the main build and CI never compile it.
// Run them in release: `swift run -c release routing-benchmark` (from this directory); scripts/benchmark-worker.sh
// runs the end-to-end one.
let package = Package(
    name: "routing-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // Named, because a path dependency is otherwise identified by its directory name (a clone may be named anything).
        .package(name: "wallet-notification-worker", path: "..")
    ],
    targets: [
        // Counts heap allocations by interposing malloc and friends (Linux/glibc).
        .target(name: "CAllocationCounter"),
        // The deterministic message mix, shared by both benchmarks.
        .target(
            name: "BenchmarkWorkload",
            dependencies: [.product(name: "WalletRouting", package: "wallet-notification-worker")]
        ),
        .executableTarget(
            name: "routing-benchmark",
            dependencies: [
                .product(name: "WalletRouting", package: "wallet-notification-worker"),
                "BenchmarkWorkload",
                "CAllocationCounter",
            ]
        ),
        // The store's share of the worker (routing + SQLite transaction per batch), without the broker.
        .executableTarget(
            name: "store-benchmark",
            dependencies: [
                .product(name: "WalletRouting", package: "wallet-notification-worker"),
                .product(name: "WalletStore", package: "wallet-notification-worker"),
                "BenchmarkWorkload",
            ]
        ),
        // The end-to-end benchmark's helper: preloads the broker with the mix and watches a contender drain it
        // (scripts/benchmark-worker.sh).
        .executableTarget(
            name: "worker-load",
            dependencies: [
                .product(name: "AMQPTransport", package: "wallet-notification-worker"),
                .product(name: "WalletRouting", package: "wallet-notification-worker"),
                "BenchmarkWorkload",
            ]
        ),
    ]
)

// swift-tools-version:6.1
import PackageDescription

// The routing benchmark lives in its own package so the main build and CI never compile it.
// Run it in release: `swift run -c release routing-benchmark` (from this directory).
let package = Package(
    name: "routing-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // Named, because a path dependency is otherwise identified by its directory name (a clone may be named anything).
        .package(name: "wallet-notification-worker", path: ".."),
    ],
    targets: [
        // Counts heap allocations by interposing malloc and friends (Linux/glibc).
        .target(name: "CAllocationCounter"),
        .executableTarget(
            name: "routing-benchmark",
            dependencies: [
                .product(name: "WalletRouting", package: "wallet-notification-worker"),
                "CAllocationCounter",
            ]
        ),
    ]
)

import AMQPTransport

/// What `wallet-worker --version` prints and `wallet_build_info` exports.
public enum WorkerVersion {
    /// The worker's release; raised with each release.
    public static let current = "0.9.0"

    /// The Swift compiler the binary was built with (major.minor).
    public static var swift: String {
        #if compiler(>=6.4)
            "6.4+"
        #elseif compiler(>=6.3)
            "6.3"
        #elseif compiler(>=6.2)
            "6.2"
        #else
            "6.1 or older"
        #endif
    }

    /// One line: the worker, the librabbitmq it runs with, the compiler it was built with.
    public static var description: String {
        "wallet-worker \(current) (librabbitmq \(AMQPLibrary.version), Swift \(swift))"
    }
}

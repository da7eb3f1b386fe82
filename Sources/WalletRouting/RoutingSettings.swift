/// The tunables of the contract, with its defaults.
public struct RoutingSettings: Sendable, Hashable {
    /// Exchange names results are published to (CONTRACT.md §1).
    public struct ResultExchanges: Sendable, Hashable {
        public var events = "wallet.events"
        public var transactions = "wallet.transactions"
        public var replenishment = "wallet.replenishment"
        public var actions = "wallet.actions"
        public var installations = "wallet.installations"

        public init() {}
    }

    /// Largest accepted body. Default: `65536` bytes.
    public var maximumBodyBytes = 65_536
    /// Largest body a delivery may hold in memory: twice `maximumBodyBytes`. A body over the limit but under this
    /// is read so its dead letter can be the worker's own, with `x-worker-error` (CONTRACT §8); a larger one is
    /// never buffered, and the broker dead-letters it (memory per delivery stays bounded in bytes).
    public var bodyReadCeiling: Int {
        maximumBodyBytes.multipliedReportingOverflow(by: 2).overflow ? .max : maximumBodyBytes * 2
    }
    /// Records returned by a TNS result. Default: `10`.
    public var transactionHistoryLimit = 10
    /// Records older than this before the newest kept one are left out of a TNS result. Default: 30 days.
    public var transactionHistoryWindowSeconds: Double = 30 * 86_400
    /// `numberOfPaymentsLeft` after a replenishment. Default: `10`.
    public var paymentKeyBatchSize = 10
    /// Validity of replenished keys. Default: 7 days.
    public var paymentKeyValiditySeconds: Double = 7 * 86_400
    /// Longest accepted `message_id`, in UTF-8 bytes: a result's `message_id` is `<message_id>/<n>`, and AMQP short
    /// strings hold 255 bytes. 240 leaves room for 14 digits of `n`.
    public static let maximumMessageIDBytes = 240
    /// Longest `traceparent` header copied onto results, in bytes (a W3C version-00 value is 55): a longer one is
    /// no trace context, and copied it could make a result's properties too large for a frame.
    public static let maximumTraceparentBytes = 512
    /// Longest accepted non-SDK `action`, in UTF-8 bytes. Default: `200`.
    public var maximumActionBytes = 200
    public var exchanges = ResultExchanges()

    public init() {}
}

/// Card lifecycle states (CONTRACT.md §3). A card never seen is "absent": `nil` where a `CardState?` is used.
public enum CardState: String, Sendable, Hashable, CaseIterable {
    case active
    case suspended
    case deleted
}

/// The payment-key type a card's install chose (CONTRACT.md §3, §5).
public enum KeyType: String, Sendable, Hashable, CaseIterable {
    case suk = "SUK"
    case luk = "LUK"
}

/// The payment keys last issued to a card (CONTRACT.md §5).
public struct PaymentKeyInfo: Sendable, Hashable {
    public var numberOfPaymentsLeft: Int
    /// Seconds since the Unix epoch.
    public var expiresAt: Double

    public init(numberOfPaymentsLeft: Int, expiresAt: Double) {
        self.numberOfPaymentsLeft = numberOfPaymentsLeft
        self.expiresAt = expiresAt
    }
}

/// Everything the store keeps about one digital card.
public struct CardRecord: Sendable, Hashable {
    public var digitalCardId: String
    public var state: CardState
    /// The last `tokenizedCardId` seen in a CPS message that applied to this card.
    public var tokenizedCardId: String?
    public var keyType: KeyType
    public var paymentKeys: PaymentKeyInfo?

    public init(
        digitalCardId: String,
        state: CardState,
        tokenizedCardId: String? = nil,
        keyType: KeyType = .suk,
        paymentKeys: PaymentKeyInfo? = nil
    ) {
        self.digitalCardId = digitalCardId
        self.state = state
        self.tokenizedCardId = tokenizedCardId
        self.keyType = keyType
        self.paymentKeys = paymentKeys
    }
}

/// A registered device installation (CONTRACT.md §7), normalised.
public struct Installation: Sendable, Hashable {
    public var installationId: String
    /// `apns` or `fcm`.
    public var platform: String
    /// Upper-case hex for `apns`. Never echoed in results or logs.
    public var pushChannel: String
    public var tags: [String]

    public init(installationId: String, platform: String, pushChannel: String, tags: [String]) {
        self.installationId = installationId
        self.platform = platform
        self.pushChannel = pushChannel
        self.tags = tags
    }
}

/// Read access to the state a message touches. The store implements it inside its transaction;
/// `InMemoryWalletState` implements it for tests, the benchmark and the broker-free mode.
/// Reads may throw (store unavailable): the router rethrows, and the worker treats that as transient.
public protocol WalletStateReading {
    func card(_ digitalCardId: String) throws -> CardRecord?
    func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool
    /// The card's records, newest first by `instant` (ties: the later stored first), keeping only those whose
    /// `isAuxiliaryTransaction` equals `auxiliary` when it is non-nil, at most `limit` of them.
    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord]
}

/// Every failure the transport reports. Callers never need the C module to read one.
///
/// `replyCode`/`replyText` carry the broker's words when it closed a channel or the connection
/// (404 NOT_FOUND, 406 PRECONDITION_FAILED, 403 ACCESS_REFUSED, 320 CONNECTION_FORCED, ...).
public struct AMQPError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: String, Hashable, Sendable {
            case invalidURL, invalidArgument, connectionFailed, connectTimeout, authenticationFailed, tlsFailed
            case connectionClosedByBroker, channelClosedByBroker, connectionLost, heartbeatTimeout
            case timeout, consumerCancelled, closed, protocolError
        }

        private let backing: Backing
        private init(_ backing: Backing) { self.backing = backing }

        /// The AMQP URI could not be parsed.
        public static let invalidURL = Code(.invalidURL)
        /// An argument the library rejected (e.g. a table too big for a frame).
        public static let invalidArgument = Code(.invalidArgument)
        /// TCP connect or the AMQP handshake failed (refused, unreachable, DNS).
        public static let connectionFailed = Code(.connectionFailed)
        /// The connect timeout expired before the socket was open.
        public static let connectTimeout = Code(.connectTimeout)
        /// The broker refused the credentials or the virtual host.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// TLS set-up, handshake, peer or hostname verification failed.
        public static let tlsFailed = Code(.tlsFailed)
        /// The broker sent connection.close; see `replyCode`.
        public static let connectionClosedByBroker = Code(.connectionClosedByBroker)
        /// The broker sent channel.close; see `replyCode`. The channel is gone, the connection is fine.
        public static let channelClosedByBroker = Code(.channelClosedByBroker)
        /// The socket failed or was closed under us.
        public static let connectionLost = Code(.connectionLost)
        /// No traffic from the broker for two heartbeat intervals.
        public static let heartbeatTimeout = Code(.heartbeatTimeout)
        /// An operation (e.g. waiting for publisher confirms) took longer than allowed.
        public static let timeout = Code(.timeout)
        /// The broker cancelled our consumer (its queue was deleted, or a quorum queue failed over).
        public static let consumerCancelled = Code(.consumerCancelled)
        /// The connection or channel was closed by this process.
        public static let closed = Code(.closed)
        /// The broker or library broke the protocol (unexpected frame, bad data).
        public static let protocolError = Code(.protocolError)

        public var description: String { backing.rawValue }
    }

    public var code: Code
    /// Human-readable detail.
    public var message: String
    /// The AMQP reply code of a channel.close or connection.close from the broker.
    public var replyCode: UInt16?
    public var replyText: String?
    /// The librabbitmq status code (`AMQP_STATUS_*`, negative), when the library reported the failure.
    public var libraryStatus: Int32?
    /// Set when the connection ended because a delivery's content header could not be decoded: which delivery,
    /// and how it was settled before the connection ended (`UndecodableContentHandling`).
    public var undecodableDelivery: UndecodableDelivery?
    public var file: String
    public var line: UInt

    public init(
        code: Code, message: String, replyCode: UInt16? = nil, replyText: String? = nil,
        libraryStatus: Int32? = nil, file: String = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.message = message
        self.replyCode = replyCode
        self.replyText = replyText
        self.libraryStatus = libraryStatus
        self.file = file
        self.line = line
    }

    /// True when the same operation may succeed on a new connection or channel after a delay:
    /// lost connections, timeouts, a broker restarting (320 CONNECTION_FORCED) or out of resources.
    /// False for configuration and programming errors (bad URL, credentials, 404, 406, 403).
    public var isRetriable: Bool {
        switch code {
        case .connectionFailed, .connectTimeout, .connectionLost, .heartbeatTimeout, .timeout, .consumerCancelled:
            return true
        case .connectionClosedByBroker, .channelClosedByBroker:
            // 320 connection-forced (broker shutting down), 405 resource-locked, 506 resource-error, 541 internal-error
            return replyCode.map { [320, 405, 506, 541].contains($0) } ?? true
        default:
            return false
        }
    }

    public var description: String {
        var text = "AMQPError.\(code): \(message)"
        if let replyCode { text += " (reply \(replyCode)\(replyText.map { " \($0)" } ?? ""))" }
        if let libraryStatus { text += " [librabbitmq status \(libraryStatus)]" }
        return text
    }
}

extension AMQPError: Hashable {
    public static func == (lhs: AMQPError, rhs: AMQPError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.replyCode == rhs.replyCode
            && lhs.replyText == rhs.replyText && lhs.libraryStatus == rhs.libraryStatus
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(replyCode)
    }
}

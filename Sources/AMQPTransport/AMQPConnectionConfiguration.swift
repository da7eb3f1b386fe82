import Logging

/// How to reach and talk to the broker.
public struct AMQPConnectionConfiguration: Sendable {
    /// TLS settings for `amqps://` URLs (librabbitmq's OpenSSL socket).
    public struct TLS: Sendable, Hashable {
        /// PEM file of trusted CA certificates. When nil and `verifyPeer` is on, the system's bundle is loaded
        /// instead (librabbitmq 0.11 loads none by itself): the file `SSL_CERT_FILE` names, else the first of
        /// `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt`, `/etc/ssl/cert.pem` that
        /// exists. Default: `nil`.
        public var caCertificatePath: String?
        /// PEM client certificate and key, for brokers that require client authentication. Default: `nil`.
        public var clientCertificatePath: String?
        public var clientKeyPath: String?
        /// Verify the broker's certificate chain. Default: `true`.
        public var verifyPeer = true
        /// Verify that the certificate names the host. Default: `true`.
        public var verifyHostname = true

        public init() {}
    }

    public var url: AMQPURL
    /// Time allowed for the TCP (and TLS) connect and the AMQP handshake. Default: 10 s.
    public var connectTimeout: Duration = .seconds(10)
    /// Heartbeat interval asked of the broker; zero disables heartbeats. Default: 10 s.
    public var heartbeat: Duration = .seconds(10)
    /// Largest frame size asked of the broker. Default: `131072`.
    public var frameMax = Self.defaultFrameMax
    /// RabbitMQ's own default `frame_max`.
    public static let defaultFrameMax = 131_072
    /// Channels asked of the broker (0 means the broker's limit). Default: `0`.
    public var channelMax = 0
    /// Time allowed for one synchronous method (declare, bind, qos, ...). Default: 30 s.
    public var rpcTimeout: Duration = .seconds(30)
    /// The name the management UI shows for this connection. Default: `nil`.
    public var connectionName: String?
    /// The level of the line logged when the connection fails. Default: `.error`; lower for a connection whose
    /// failure the owner expects and reports itself.
    public var failureLogLevel: Logger.Level = .error
    public var tls = TLS()

    public init(url: AMQPURL) {
        self.url = url
    }
}

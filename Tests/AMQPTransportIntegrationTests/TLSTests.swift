import AMQPTransport
import BrokerTestSupport
import Testing

/// `amqps://` against the test broker's real TLS listener (scripts/rabbitmq-local.sh generates its CA and
/// a certificate naming only `localhost`; scripts/test.sh exports AMQPS_URL and AMQP_TLS_CA_FILE).
@Suite("TLS connections", .timeLimit(.minutes(1)))
struct TLSTests {
    private static func tlsConfiguration(host: String? = nil) throws -> AMQPConnectionConfiguration {
        try TestBroker.tlsConfiguration(purpose: "tls-test", host: host)
    }

    @Test func verifiedTLSConnectionCarriesMessages() async throws {
        let connection = try await TestBroker.connect(configuration: Self.tlsConfiguration())
        let channel = try await connection.openChannel()
        let queue = try await channel.declareQueue("", durable: false, exclusive: true, autoDelete: true).name
        try await channel.enableConfirms()
        let outcome = try await channel.publish(
            AMQPOutboundMessage(exchange: "", routingKey: queue, body: Array("over tls".utf8)))
        #expect(outcome == .confirmed)
        try await channel.setPrefetch(count: 10)
        for try await batch in try await channel.consume(queue: queue) {
            #expect(batch.first?.body == Array("over tls".utf8))
            try await channel.ack(deliveryTag: batch.last!.deliveryTag, multiple: true)
            break
        }
        await connection.close()
    }

    @Test func hostnameThatTheCertificateDoesNotNameIsRefused() async throws {
        // The certificate names only localhost; 127.0.0.1 is the same listener under a name it does not carry.
        let configuration = try Self.tlsConfiguration(host: "127.0.0.1")
        await #expect {
            _ = try await TestBroker.connect(configuration: configuration)
        } throws: { error in
            (error as? AMQPError)?.code == .tlsFailed
        }
    }

    @Test func theSameAddressConnectsWhenHostnameVerificationIsOff() async throws {
        // Proves the refusal above is the hostname check and nothing else.
        var configuration = try Self.tlsConfiguration(host: "127.0.0.1")
        configuration.tls.verifyHostname = false
        let connection = try await TestBroker.connect(configuration: configuration)
        await connection.close()
    }

    @Test func untrustedCertificateIsRefused() async throws {
        var configuration = try Self.tlsConfiguration()
        configuration.tls.caCertificatePath = nil  // nothing trusted: the broker's CA is unknown
        await #expect {
            _ = try await TestBroker.connect(configuration: configuration)
        } throws: { error in
            (error as? AMQPError)?.code == .tlsFailed
        }
    }
}

import Testing

@testable import AMQPTransport

@Suite("AMQP URI parsing")
struct AMQPURLTests {
    @Test func parsesEveryComponentWithPercentDecoding() throws {
        let url = try AMQPURL(parsing: "amqp://wallet%40svc:p%3Ass%2Fw@broker.internal:5673/payments%2Fprod")
        #expect(url.user == "wallet@svc")
        #expect(url.password == "p:ss/w")
        #expect(url.host == "broker.internal")
        #expect(url.port == 5673)
        #expect(url.virtualHost == "payments/prod")
        #expect(!url.useTLS)
    }

    @Test(arguments: [
        ("amqp://guest:guest@127.0.0.1:5672/%2f", "/"),
        ("amqp://guest:guest@127.0.0.1:5672/", "/"),
        ("amqp://guest:guest@127.0.0.1:5672", "/"),
        ("amqp://h/vhost", "vhost"),
    ])
    func defaultVirtualHostIsSlash(_ text: String, _ expected: String) throws {
        #expect(try AMQPURL(parsing: text).virtualHost == expected)
    }

    @Test func defaultsFollowRabbitMQsURISpec() throws {
        let plain = try AMQPURL(parsing: "amqp://")
        #expect(plain.host == "localhost")
        #expect(plain.port == 5672)
        #expect(plain.user == "guest" && plain.password == "guest")
        let tls = try AMQPURL(parsing: "amqps://broker")
        #expect(tls.useTLS)
        #expect(tls.port == 5671)
    }

    @Test func parsesIPv6Literals() throws {
        let url = try AMQPURL(parsing: "amqp://u:p@[::1]:5680/v")
        #expect(url.host == "::1")
        #expect(url.port == 5680)
    }

    @Test(arguments: [
        ("http://localhost", "scheme"),
        ("amqp://host:notaport/", "port"),
        ("amqp://host:70000/", "port"),
        ("amqp://host/a/b", "one path segment"),
        ("amqp://us%zzer:pw@host/", "percent-encoding"),
        ("amqp://host/?heartbeat=5", "query"),
        ("amqp://[::1/", "IPv6"),
    ])
    func rejectsMalformedURIsWithAReason(_ text: String, _ reasonFragment: String) {
        #expect {
            _ = try AMQPURL(parsing: text)
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.code == .invalidURL && error.message.contains(reasonFragment)
        }
    }

    @Test func descriptionMasksThePassword() throws {
        let url = try AMQPURL(parsing: "amqp://user:secret@host:5672/%2f")
        #expect(!url.description.contains("secret"))
        #expect(url.description == "amqp://user:***@host:5672/%2f")
    }
}

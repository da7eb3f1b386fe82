import Testing

@testable import AMQPTransport

/// Linux refuses a thread name over 15 bytes, and the I/O thread then keeps its creator's name.
@Suite("The I/O thread's name")
struct IOThreadNameTests {
    @Test(
        "\"amqp-io\" and the connection name's last word, at most 15 bytes",
        arguments: [
            ("wallet-worker host-1 #0 publish", "amqp-io publish"),
            ("wallet-worker host-1 #0 consume", "amqp-io consume"),
            ("wallet-worker host-1 #0 reply", "amqp-io reply"),
            ("wallet-worker host-1 queue depths", "amqp-io depths"),
            ("wallet-worker dead-letters (consuming)", "amqp-io (consum"),
            ("amqp-demo", "amqp-io amqp-de"),
            ("", "amqp-io"),
        ])
    func name(connectionName: String, expected: String) {
        #expect(ConnectionRuntime.ioThreadName(connectionName: connectionName) == expected)
        #expect(ConnectionRuntime.ioThreadName(connectionName: connectionName).utf8.count <= 15)
    }

    @Test("no connection name, or a multi-byte last word cut on a character")
    func edges() {
        #expect(ConnectionRuntime.ioThreadName(connectionName: nil) == "amqp-io")
        let name = ConnectionRuntime.ioThreadName(connectionName: "worker éééééé")
        #expect(name == "amqp-io ééé")
        #expect(name.utf8.count <= 15)
    }
}

internal import CRabbitMQ

/// The librabbitmq this process runs with.
public enum AMQPLibrary {
    /// librabbitmq's own version string, e.g. `0.11.0`.
    public static var version: String { String(cString: amqp_version()) }
}

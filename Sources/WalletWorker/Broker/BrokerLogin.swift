import AMQPTransport
import Logging

/// The worker's first login to the broker, before anything else starts: settings that cannot work stop the worker
/// at once instead of being retried for ever behind a `/readyz` 503.
///
/// A broker that answers and refuses the login (403 ACCESS_REFUSED: user or password; 530 NOT_ALLOWED: the vhost)
/// or whose TLS certificate does not verify is a setting to fix: the worker exits with status 2, naming the
/// refusal, and a rollout with a wrong secret fails. A broker that does not answer (down, starting, the network) is
/// waited for, with the reconnect backoff, as before. Once logged in, a later refusal (a password rotated under a
/// running worker) is retried like any lost session and counted in `wallet_broker_login_refusals_total`.
enum BrokerLogin {
    /// The broker refused the first login: the worker stops.
    struct Refused: Error, CustomStringConvertible {
        var error: AMQPError
        var url: String

        /// `text` as a sentence: ending with one period (RabbitMQ's refusal ends with one already).
        private func sentence(_ text: String) -> String {
            text.hasSuffix(".") ? text : text + "."
        }

        var description: String {
            switch error.code {
            case .tlsFailed:
                "the broker's TLS certificate did not verify at the first connection to \(url): "
                    + "\(sentence(error.message)) Check --tls-ca-file (AMQP_TLS_CA_FILE) and the host name in AMQP_URL"
            default:
                "the broker refused the first login to \(url): \(sentence(error.replyText ?? error.message)) Check the "
                    + "user and password in AMQP_URL (or AMQP_URL_FILE) and that the user may use the vhost"
            }
        }
    }

    /// Whether `error` is the broker refusing the login (credentials or vhost).
    static func isRefusal(_ error: any Error) -> Bool {
        (error as? AMQPError)?.code == .authenticationFailed
    }

    /// Logs in once and closes the connection. Returns once a login succeeded (or `stop` fired while waiting for an
    /// unreachable broker); throws `Refused` when the broker refuses it.
    static func check(
        _ broker: any BrokerConnector, url: String, backoff: ReconnectBackoff, stop: StopSignal, logger: Logger
    ) async throws {
        var attempt = 0
        var generator = SystemRandomNumberGenerator()
        while !stop.isStopped {
            do {
                try await broker.checkLogin()
                return
            } catch  where error.code == .authenticationFailed || error.code == .tlsFailed {
                throw Refused(error: error, url: url)
            } catch {
                attempt += 1
                let delay = backoff.delay(attempt: attempt, using: &generator)
                logger.warning(
                    "the broker is unreachable at start; trying again",
                    metadata: ["error": "\(error)", "in": "\(DurationText.format(delay))", "attempt": "\(attempt)"])
                await stop.sleep(for: delay)
            }
        }
    }
}

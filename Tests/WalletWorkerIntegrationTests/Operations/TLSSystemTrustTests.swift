import AMQPTransport
import BrokerTestSupport
import Foundation
import Testing

/// `amqps://` without `--tls-ca-file`: the worker trusts the system's bundle, which `SSL_CERT_FILE` can name
/// (issue 13). librabbitmq 0.11 loads no CA by itself, so before the fix every such connection failed verification.
///
/// `wallet-worker declare` as a child process, so `SSL_CERT_FILE` is set for it alone (setting it in this process
/// would change what the other TLS tests trust). The test broker's certificate is signed by the CA that
/// scripts/test.sh exports as AMQP_TLS_CA_FILE; the child gets that CA only through `SSL_CERT_FILE`.
@Suite("amqps without a CA file", .timeLimit(.minutes(2)))
struct TLSSystemTrustTests {
    private static func tlsSettings() throws -> (url: String, caFile: String) {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["AMQPS_URL"], !url.isEmpty, let caFile = environment["AMQP_TLS_CA_FILE"],
            !caFile.isEmpty
        else {
            Issue.record(
                "AMQPS_URL and AMQP_TLS_CA_FILE must point at the test broker's TLS listener (scripts/test.sh sets them)"
            )
            throw CancellationError()
        }
        return (url, caFile)
    }

    /// Runs `wallet-worker declare` over TLS with no CA file configured; returns how it ended and its log.
    private static func declare(
        _ topology: ResilienceTopology, sslCertFile: String, label: String
    ) async throws -> (exit: ChildExit, log: String) {
        let (url, _) = try tlsSettings()
        let declare = try WorkerProcess(
            ["declare"] + topology.flags + ["--log-format", "json"], amqpURL: url, label: label,
            // Empty counts as unset for both (the worker's settings, and SystemCABundle for SSL_CERT_FILE).
            environment: ["AMQP_TLS_CA_FILE": "", "SSL_CERT_FILE": sslCertFile])
        defer {
            declare.kill()
            declare.process.removeLog()
        }
        guard let (exit, _) = await declare.waitForExit(timeout: .seconds(60)) else {
            throw ChildProcessError("wallet-worker declare did not finish\n\(declare.logTail())")
        }
        return (exit, declare.logTail())
    }

    @Test func theCAThatSSLCertFileNamesVerifiesTheBroker() async throws {
        let (_, caFile) = try Self.tlsSettings()
        let topology = ResilienceTopology("tls-ssl-cert-file")
        let (exit, log) = try await Self.declare(topology, sslCertFile: caFile, label: "declare-tls-ssl-cert-file")
        #expect(exit == .exited(0), "\(log)")

        // The topology is there: the declare really went through the TLS connection.
        let connection = try await TestBroker.connect(purpose: "tls-ssl-cert-file check")
        do {
            _ = try await connection.openChannel().queueStatus(topology.work)
        } catch {
            Issue.record("the work queue was not declared: \(error)")
        }
        await connection.close(timeout: .seconds(5))
        await topology.delete()
    }

    @Test func theSystemBundleDoesNotTrustTheTestCA() async throws {
        // The control: without SSL_CERT_FILE the distribution's bundle is loaded, and the test broker's private CA
        // is not in it. Verification is on, so the connection is refused and declare fails.
        let topology = ResilienceTopology("tls-system-bundle")
        let (exit, log) = try await Self.declare(topology, sslCertFile: "", label: "declare-tls-system-bundle")
        // The broker cannot be used with these settings: status 2 (README, "Exit statuses").
        #expect(exit == .exited(2), "\(log)")
        #expect(log.contains("tlsFailed"), "\(log)")
        await topology.delete()
    }
}

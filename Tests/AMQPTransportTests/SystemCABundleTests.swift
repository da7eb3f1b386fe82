import Testing

@testable import AMQPTransport

/// Which CA file an `amqps://` connection loads when none is configured (librabbitmq 0.11 loads none by itself).
@Suite("System CA bundle")
struct SystemCABundleTests {
    private static func tls(caFile: String? = nil, verifyPeer: Bool = true) -> AMQPConnectionConfiguration.TLS {
        var tls = AMQPConnectionConfiguration.TLS()
        tls.caCertificatePath = caFile
        tls.verifyPeer = verifyPeer
        return tls
    }

    private static func path(
        _ tls: AMQPConnectionConfiguration.TLS, environment: [String: String] = [:], existing: Set<String>
    ) -> String? {
        SystemCABundle.path(for: tls, environment: { environment[$0] }, fileExists: { existing.contains($0) })
    }

    @Test func theConfiguredFileWins() {
        let chosen = Self.path(
            Self.tls(caFile: "/run/secrets/ca.pem"), environment: ["SSL_CERT_FILE": "/elsewhere.pem"],
            existing: ["/etc/ssl/certs/ca-certificates.crt"])
        #expect(chosen == "/run/secrets/ca.pem")
    }

    @Test func sslCertFileComesBeforeTheDistributionBundles() {
        let chosen = Self.path(
            Self.tls(), environment: ["SSL_CERT_FILE": "/opt/ca.pem"], existing: ["/etc/ssl/certs/ca-certificates.crt"])
        #expect(chosen == "/opt/ca.pem")
    }

    @Test func aMissingSSLCertFileIsStillUsedSoLoadingItFailsWithItsPath() {
        #expect(Self.path(Self.tls(), environment: ["SSL_CERT_FILE": "/missing.pem"], existing: []) == "/missing.pem")
    }

    @Test func anEmptySSLCertFileCountsAsUnset() {
        let chosen = Self.path(Self.tls(), environment: ["SSL_CERT_FILE": ""], existing: ["/etc/ssl/cert.pem"])
        #expect(chosen == "/etc/ssl/cert.pem")
    }

    @Test(
        arguments: [
            (
                ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"],
                "/etc/ssl/certs/ca-certificates.crt"
            ),
            (["/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"], "/etc/pki/tls/certs/ca-bundle.crt"),
            (["/etc/ssl/cert.pem"], "/etc/ssl/cert.pem"),
        ] as [([String], String)])
    func theFirstDistributionBundleThatExists(_ existing: [String], _ expected: String) {
        #expect(Self.path(Self.tls(), existing: Set(existing)) == expected)
    }

    @Test func nothingWhenNoBundleExists() {
        #expect(Self.path(Self.tls(), existing: []) == nil)
    }

    @Test func nothingIsLoadedWhenThePeerIsNotVerified() {
        let chosen = Self.path(
            Self.tls(verifyPeer: false), environment: ["SSL_CERT_FILE": "/opt/ca.pem"],
            existing: ["/etc/ssl/certs/ca-certificates.crt"])
        #expect(chosen == nil)
    }
}

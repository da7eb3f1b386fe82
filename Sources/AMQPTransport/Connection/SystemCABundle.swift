#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The CA certificates an `amqps://` connection trusts when no CA file is configured.
///
/// librabbitmq 0.11's `amqp_ssl_socket_new` makes an OpenSSL context with no trusted certificates at all (it never
/// calls `SSL_CTX_set_default_verify_paths`), so without a CA file every peer verification fails. The transport
/// loads the system's bundle itself: the file `SSL_CERT_FILE` names (OpenSSL's own variable, so it means what it
/// means to `openssl s_client`), else the first bundle that exists of Debian/Ubuntu/Alpine's, Fedora/RHEL's and
/// macOS/BSD's. `SSL_CERT_DIR` (a hashed directory) is not read: librabbitmq takes one PEM file.
enum SystemCABundle {
    /// Where distributions put their PEM bundle, in the order they are tried.
    static let candidatePaths = [
        "/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Alpine (the ca-certificates package)
        "/etc/pki/tls/certs/ca-bundle.crt",  // Fedora, RHEL
        "/etc/ssl/cert.pem",  // macOS, FreeBSD, OpenBSD
    ]

    /// The CA file to give `amqp_ssl_socket_set_cacert`, or nil to load none.
    ///
    /// - Parameters:
    ///   - tls: the configured file wins; with peer verification off nothing is needed.
    ///   - environment: the process environment (injected for tests).
    ///   - fileExists: whether a path names a readable file (injected for tests).
    static func path(
        for tls: AMQPConnectionConfiguration.TLS,
        environment: (String) -> String? = { getenv($0).map { String(cString: $0) } },
        fileExists: (String) -> Bool = { access($0, R_OK) == 0 }
    ) -> String? {
        if let configured = tls.caCertificatePath { return configured }
        guard tls.verifyPeer else { return nil }
        // Taken as given even when missing: loading it fails with the path in the error, which is what someone
        // who set the variable needs to see.
        if let named = environment("SSL_CERT_FILE"), !named.isEmpty { return named }
        return candidatePaths.first(where: fileExists)
    }
}

import Foundation

/// Where a PostgreSQL store lives: `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=...&schema=...`
/// (`postgresql://` too). User, password and database are percent-decoded. The password is never part of the
/// `description` (it goes into start-up logs).
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// How the connection is encrypted (libpq's `sslmode` names and meanings).
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, else plain; the certificate is not verified (libpq's default).
        case prefer
        /// TLS or no connection; the certificate is not verified.
        case require
        /// TLS, the certificate verified against the system's trust store (or `sslrootcert`) and the host name.
        case verifyFull = "verify-full"
    }

    public var host: String
    /// Default: 5432.
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    /// Default: `prefer`.
    public var tlsMode: TLSMode
    /// A CA certificate file (PEM) for `verify-full`; nil uses the system's trust store.
    public var tlsRootCertificatePath: String?
    /// The schema holding the store's tables, created when missing; nil uses the server's `search_path` (usually
    /// `public`). Lower-case letters, digits and `_`, starting with a letter or `_`.
    public var schema: String?

    public init(
        host: String, port: Int = 5432, user: String, password: String?, database: String,
        tlsMode: TLSMode = .prefer, tlsRootCertificatePath: String? = nil, schema: String? = nil
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.tlsMode = tlsMode
        self.tlsRootCertificatePath = tlsRootCertificatePath
        self.schema = schema
    }

    /// Parses a `postgres://` or `postgresql://` URL. Errors never echo the password.
    public init(parsing text: String) throws(StoreError) {
        guard let schemeEnd = text.range(of: "://"),
            ["postgres", "postgresql"].contains(text[..<schemeEnd.lowerBound].lowercased())
        else {
            throw Self.invalid("expected postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
        guard let components = URLComponents(string: text) else {
            throw Self.invalid("not a valid URL (percent-encode special characters in the user and password)")
        }
        guard let host = components.host, !host.isEmpty else { throw Self.invalid("needs a host") }
        guard let user = components.user, !user.isEmpty else { throw Self.invalid("needs a user") }
        let path = components.path
        let database = path.hasPrefix("/") ? String(path.dropFirst()) : path
        guard !database.isEmpty, !database.contains("/") else {
            throw Self.invalid("needs a database name as its path, e.g. postgres://wallet@db:5432/wallet")
        }
        self.init(
            host: host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host,
            port: components.port ?? 5432, user: user, password: components.password, database: database)
        guard (1...65_535).contains(port) else { throw Self.invalid("port must be between 1 and 65535") }
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else {
                    throw Self.invalid("sslmode must be disable, prefer, require or verify-full")
                }
                tlsMode = mode
            case "sslrootcert":
                guard !value.isEmpty else { throw Self.invalid("sslrootcert needs a file path") }
                tlsRootCertificatePath = value
            case "schema":
                guard Self.isPlainIdentifier(value) else {
                    throw Self.invalid("schema must be lower-case letters, digits and _, starting with a letter or _")
                }
                schema = value
            default:
                throw Self.invalid("unknown parameter `\(item.name)`: expected sslmode, sslrootcert or schema")
            }
        }
    }

    /// The URL without the password (`***` shows that one was given).
    public var description: String {
        var text = "postgres://\(Self.encode(user))"
        if password != nil { text += ":***" }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        text += "@\(shownHost):\(port)/\(Self.encode(database))"
        var parameters: [String] = []
        if tlsMode != .prefer { parameters.append("sslmode=\(tlsMode.rawValue)") }
        if let tlsRootCertificatePath { parameters.append("sslrootcert=\(tlsRootCertificatePath)") }
        if let schema { parameters.append("schema=\(schema)") }
        if !parameters.isEmpty { text += "?" + parameters.joined(separator: "&") }
        return text
    }

    /// Host, port, database and schema: what error messages name.
    var shortName: String {
        "\(host):\(port)/\(database)" + (schema.map { " schema \($0)" } ?? "")
    }

    /// An identifier that needs no quoting anywhere (so it can be written into SQL and `search_path` as is).
    static func isPlainIdentifier(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 63 else { return false }
        let isStart = (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first) || first == UInt8(ascii: "_")
        return isStart
            && text.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_")
            }
    }

    private static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? text
    }

    private static func invalid(_ reason: String) -> StoreError {
        StoreError(.permanent, "store location postgres://…: \(reason)")
    }
}

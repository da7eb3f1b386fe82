/// A parsed AMQP URI: `amqp://user:pass@host:port/vhost` or `amqps://...` (RabbitMQ's URI spec).
///
/// Components are percent-decoded; an empty path means the default vhost `/`, and `%2f` spells `/`.
/// Parsed in Swift rather than with `amqp_parse_url`, which does not report what is wrong.
public struct AMQPURL: Sendable, Hashable, CustomStringConvertible {
    public var useTLS: Bool
    public var host: String
    public var port: Int
    public var user: String
    public var password: String
    public var virtualHost: String

    public init(
        host: String = "127.0.0.1", port: Int? = nil, user: String = "guest", password: String = "guest",
        virtualHost: String = "/", useTLS: Bool = false
    ) {
        self.host = host
        self.port = port ?? (useTLS ? 5671 : 5672)
        self.user = user
        self.password = password
        self.virtualHost = virtualHost
        self.useTLS = useTLS
    }

    /// Parses an AMQP URI, throwing `AMQPError.Code.invalidURL` with the reason.
    ///
    /// The error never carries the password: reasons name the part that is wrong without quoting it, and the URL
    /// is shown as `redacted(_:)` makes it. A password is secret even when the parser cannot find it (a `/` in it
    /// ends the authority early, so part of it is read as the port).
    public init(parsing text: String) throws(AMQPError) {
        func invalid(_ reason: String) -> AMQPError {
            var reason = reason
            let authorityStart = text.firstRange(of: "://")?.upperBound ?? text.startIndex
            if let slash = text[authorityStart...].firstIndex(of: "/"), text[slash...].contains("@") {
                reason += " (an '@' after the first '/': write '/' in the user name or password as %2F)"
            }
            return AMQPError(code: .invalidURL, message: "invalid AMQP URL \(Self.redacted(text)): \(reason)")
        }
        let rest: Substring
        if text.hasPrefix("amqps://") {
            useTLS = true
            rest = text.dropFirst("amqps://".count)
        } else if text.hasPrefix("amqp://") {
            useTLS = false
            rest = text.dropFirst("amqp://".count)
        } else {
            throw invalid("scheme must be amqp:// or amqps://")
        }
        if rest.contains("?") || rest.contains("#") {
            throw invalid("query parameters are not supported; use the worker's flags")
        }
        let authority: Substring
        let path: Substring?
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = rest[rest.index(after: slash)...]
        } else {
            authority = rest
            path = nil
        }
        var hostPort = authority
        user = "guest"
        password = "guest"
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.percentDecoded(userInfo[..<colon], "the user name", invalid)
                password = try Self.percentDecoded(userInfo[userInfo.index(after: colon)...], "the password", invalid)
            } else {
                user = try Self.percentDecoded(userInfo, "the user name", invalid)
                password = ""
            }
        }
        var portText: Substring?
        if hostPort.hasPrefix("[") {  // IPv6 literal
            guard let close = hostPort.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address") }
            host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw invalid("unexpected text after IPv6 address")
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = try Self.percentDecoded(hostPort[..<colon], "the host", invalid)
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = try Self.percentDecoded(hostPort, "the host", invalid)
        }
        if host.isEmpty { host = "localhost" }
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw invalid("the port is not a number between 1 and 65535")
            }
            self.port = port
        } else {
            port = useTLS ? 5671 : 5672
        }
        if let path {
            guard !path.contains("/") else { throw invalid("the vhost must be one path segment (write / as %2f)") }
            virtualHost = path.isEmpty ? "/" : try Self.percentDecoded(path, "the vhost", invalid)
        } else {
            virtualHost = "/"
        }
    }

    /// - Parameter part: what `text` is, for the error; the text itself is never quoted (it may be the password).
    private static func percentDecoded(_ text: Substring, _ part: String, _ invalid: (String) -> AMQPError)
        throws(AMQPError) -> String
    {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw invalid("bad percent-encoding in \(part) (% must be followed by two hex digits)")
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw invalid("the percent-encoding of \(part) is not UTF-8")
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `text` with everything between the first `:` after the scheme and the last `@` masked: the password
    /// wherever a malformed URL puts it, since the user name ends at the first `:` and the host starts after the
    /// last `@`. Masks too much rather than too little (an `@` in the vhost masks the host as well).
    /// Text without `@` has no password and is returned whole.
    public static func redacted(_ text: String) -> String {
        let start = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        guard let at = text[start...].lastIndex(of: "@"), let colon = text[start..<at].firstIndex(of: ":") else {
            return text
        }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }

    /// The URI with the password masked, for logs.
    public var description: String {
        let vhost = virtualHost == "/" ? "%2f" : virtualHost
        return "\(useTLS ? "amqps" : "amqp")://\(user):***@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(vhost)"
    }
}

/// Which store `--store` names: `memory`, `sqlite:PATH` (a file, created when missing), or a PostgreSQL URL
/// (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`, `postgresql://` too; see `PostgresLocation`).
public enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    case memory
    case sqlite(path: String)
    case postgres(PostgresLocation)

    public init(parsing text: String) throws(StoreError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw StoreError(.permanent, "store location `sqlite:` needs a file path, e.g. `sqlite:wallet.sqlite`")
            }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(try PostgresLocation(parsing: text))
        } else {
            // Quoted unless it may be a mistyped URL with credentials: the password must not reach the logs.
            let shown = text.contains("@") ? "(not shown: it contains `@`)" : "`\(text)`"
            throw StoreError(
                .permanent,
                "unknown store location \(shown): expected `sqlite:PATH`, "
                    + "`postgres://USER:PASSWORD@HOST:PORT/DATABASE` or `memory`")
        }
    }

    /// The location as given, without a PostgreSQL password.
    public var description: String {
        switch self {
        case .memory: "memory"
        case .sqlite(let path): "sqlite:\(path)"
        case .postgres(let location): location.description
        }
    }
}

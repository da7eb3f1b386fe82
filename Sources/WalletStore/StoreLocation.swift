/// Which store `--store` names: `memory`, or `sqlite:PATH` (a file, created when missing).
public enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    case memory
    case sqlite(path: String)

    public init(parsing text: String) throws(StoreError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else {
                throw StoreError(.permanent, "store location `sqlite:` needs a file path, e.g. `sqlite:wallet.sqlite`")
            }
            self = .sqlite(path: path)
        } else {
            throw StoreError(
                .permanent, "unknown store location `\(text)`: expected `sqlite:PATH` or `memory`")
        }
    }

    public var description: String {
        switch self {
        case .memory: "memory"
        case .sqlite(let path): "sqlite:\(path)"
        }
    }
}

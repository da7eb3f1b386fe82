/// Where `WorkerConfiguration` holds a setting's value: how a resolved value is written into it, and read back
/// for the range check of `validate()` (nil: not set, nothing to check).
public struct SettingField<Value>: Sendable {
    let read: @Sendable (WorkerConfiguration) -> Value?
    let write: @Sendable (inout WorkerConfiguration, Value) -> Void

    /// A property of the same type as the value.
    static func at(_ keyPath: WritableKeyPath<WorkerConfiguration, Value> & Sendable) -> Self {
        Self(read: { $0[keyPath: keyPath] }, write: { $0[keyPath: keyPath] = $1 })
    }

    /// A property that may be absent (`--tls-ca-file`, `--retry-delay-max`): absent is nothing to check.
    static func optional(_ keyPath: WritableKeyPath<WorkerConfiguration, Value?> & Sendable) -> Self {
        Self(read: { $0[keyPath: keyPath] }, write: { $0[keyPath: keyPath] = $1 })
    }
}

extension SettingField where Value == Bool {
    /// A `--no-…` flag: true turns the property off.
    static func negating(_ keyPath: WritableKeyPath<WorkerConfiguration, Bool> & Sendable) -> Self {
        Self(read: { !$0[keyPath: keyPath] }, write: { $0[keyPath: keyPath] = !$1 })
    }
}

extension SettingField where Value == Duration {
    /// A duration the routing core holds as whole seconds (`--history-window`).
    static func seconds(_ keyPath: WritableKeyPath<WorkerConfiguration, Double> & Sendable) -> Self {
        Self(read: { .seconds($0[keyPath: keyPath]) }, write: { $0[keyPath: keyPath] = Double($1.components.seconds) })
    }
}

import ArgumentParser
import Foundation
import WalletStore
import WalletWorker

/// One setting of the table (`Setting`) as `Setting.Typed.resolve(_:)` finds it; a value that does not parse is a
/// usage error (exit status 64).
func setting<Value>(_ flag: String?, _ entry: Setting.Typed<Value>) throws -> Value? {
    do {
        return try entry.resolve(flag)
    } catch {
        throw ValidationError(error.description)
    }
}

/// `--store` / `WALLET_STORE`. A value that does not parse is reported with the reason, never echoed: a
/// PostgreSQL URL carries a password.
func storeSetting(_ flag: String?) throws -> StoreLocation? {
    let found: (source: String, text: String)?
    do {
        found = try Setting.source(of: flag, Setting.store.flagName, Setting.store.variable)
    } catch {
        throw ValidationError(error.description)
    }
    guard let (source, text) = found else { return nil }
    do {
        return try StoreLocation(parsing: text)
    } catch {
        throw ValidationError("\(source): \(error.message)")
    }
}

/// Sets `target` when the setting has a value.
func assign<Value>(_ value: Value?, to target: inout Value) {
    if let value { target = value }
}

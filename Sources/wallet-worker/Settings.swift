import ArgumentParser
import Foundation
import WalletStore
import WalletWorker

/// One setting's value: the flag if given, else the environment variable, else nil (the default stays).
/// A value that does not parse is an error naming where it came from.
func setting<Value>(
    _ flag: String?, _ flagName: String, _ variable: String, expected: String, _ parse: (String) -> Value?
) throws -> Value? {
    let source: String
    let text: String
    if let flag {
        (source, text) = (flagName, flag)
    } else if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty {
        (source, text) = (variable, value)
    } else {
        return nil
    }
    guard let value = parse(text) else {
        throw ValidationError("\(source) \"\(text)\": expected \(expected)")
    }
    return value
}

/// `--store` / `WALLET_STORE`. A value that does not parse is reported with the reason, never echoed: a
/// PostgreSQL URL carries a password.
func storeSetting(_ flag: String?) throws -> StoreLocation? {
    let source: String
    let text: String
    if let flag {
        (source, text) = ("--store", flag)
    } else if let value = ProcessInfo.processInfo.environment["WALLET_STORE"], !value.isEmpty {
        (source, text) = ("WALLET_STORE", value)
    } else {
        return nil
    }
    do {
        return try StoreLocation(parsing: text)
    } catch {
        throw ValidationError("\(source): \(error.message)")
    }
}

func duration(_ text: String) -> Duration? { DurationText.parse(text) }

func positiveInt(_ text: String) -> Int? {
    Int(text).flatMap { $0 >= 0 ? $0 : nil }
}

func text(_ value: String) -> String? { value }

/// Sets `target` when the setting has a value.
func assign<Value>(_ value: Value?, to target: inout Value) {
    if let value { target = value }
}

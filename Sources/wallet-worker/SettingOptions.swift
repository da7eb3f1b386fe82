import ArgumentParser
import WalletWorker

/// A group of options that are settings of the table (`Setting.configurable`): each `@Option(Setting.x)` or
/// `@Flag(Setting.x)` property is named like its flag (`--store-busy-timeout`: `storeBusyTimeout`), and
/// `apply(to:)` resolves every one of them into the configuration, as ArgumentParser found them: by reflection.
/// A property named after no setting is a programming error, which the tests of the options catch
/// (`SettingsOptionsTests`).
protocol SettingOptions: ParsableArguments {}

extension SettingOptions {
    /// Each setting of the group: the flag, else its variable, else its `_FILE`; none keeps the configuration's
    /// value. A value that does not parse or is out of a range checked when parsed is a usage error (status 64).
    func apply(to configuration: inout WorkerConfiguration) throws {
        for child in Mirror(reflecting: self).children {
            guard let label = child.label else { continue }
            // A property wrapper's storage is `_name`.
            let property = label.hasPrefix("_") ? String(label.dropFirst()) : label
            guard let entry = Setting.configurable(propertyName: property) else {
                preconditionFailure("\(Self.self).\(property) is not named after a setting of the table")
            }
            let flag: String?
            switch child.value {
            case let option as Option<String?>: flag = option.wrappedValue
            case let given as Flag<Bool>: flag = given.wrappedValue ? "true" : nil
            default: preconditionFailure("\(Self.self).\(property) is neither an @Option of text nor an @Flag")
            }
            do {
                try entry.apply(flag, to: &configuration)
            } catch {
                throw ValidationError(error.description)
            }
        }
    }
}

/// One setting of the table as `Setting.Typed.resolve(_:)` finds it, for a command that reads it without a
/// configuration (`inspect --store`); a value that does not parse is a usage error (exit status 64).
func setting<Value>(_ flag: String?, _ entry: Setting.Typed<Value>) throws -> Value? {
    do {
        return try entry.resolve(flag)
    } catch {
        throw ValidationError(error.description)
    }
}

extension Option where Value == String? {
    /// The option of a setting of the table: its flag, and its help with the variable and the default.
    init<T>(_ entry: Setting.Typed<T>) {
        self.init(name: .customLong(entry.name), help: ArgumentHelp(entry.help))
    }
}

extension Flag where Value == Bool {
    /// The flag of a setting of the table (`--no-declare`), off unless given.
    init<T>(wrappedValue: Bool, _ entry: Setting.Typed<T>) {
        self.init(wrappedValue: wrappedValue, name: .customLong(entry.name), help: ArgumentHelp(entry.help))
    }
}

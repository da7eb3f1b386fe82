import ArgumentParser
import WalletWorker

/// A group of options that are settings of the table (`Setting.configurable`): each `@Option(Setting.x)` or
/// `@Flag(Setting.x)` property, listed with its entry in `givenSettings`, and `apply(to:)` resolves every one of them
/// into the configuration. Written out, not found by reflection: an entry that does not exist does not compile, and
/// an option left out of the list, or listed with another option's entry, is named by the options' tests
/// (`SettingsOptionsTests`: each option given alone must change what its own entry changes, and the options of `run`
/// must be the table's).
protocol SettingOptions: ParsableArguments {
    /// Each option of the group with the entry it sets, and what was given for it (a flag: "true" or nil).
    var givenSettings: [(any ConfigurationSetting, String?)] { get }
}

extension SettingOptions {
    /// Each setting of the group: the flag, else its variable, else its `_FILE`; none keeps the configuration's
    /// value. A value that does not parse or is out of a range checked when parsed is a usage error (status 64).
    func apply(to configuration: inout WorkerConfiguration) throws {
        for (entry, flag) in givenSettings {
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

extension WorkerConfiguration {
    /// `validate()` as the commands report it: out of range (`--prefetch 0`, a retry delay cap below the delay) is
    /// usage, said as a value that does not parse is: `Error:` and the usage, status 64, before anything is logged.
    func validatedAsUsage() throws -> WorkerConfiguration {
        do {
            try validate()
        } catch {
            throw ValidationError("\(error)")
        }
        return self
    }
}

/// A setting of `WorkerConfiguration`, whatever the type of its value: one entry of `Setting.configurable`, which
/// the commands' options apply (Sources/wallet-worker/SettingOptions.swift) and `WorkerConfiguration.validate()`
/// checks.
public protocol ConfigurationSetting: Sendable {
    var setting: Setting { get }
    /// Resolves the setting (`flag`, then the variable, then the file `<variable>_FILE` names) into
    /// `configuration`; when none is given the configuration's value stays.
    func apply(_ flag: String?, to configuration: inout WorkerConfiguration) throws(ConfigurationError)
    /// Throws "--flag must be …" when the configuration's value is out of the setting's range.
    func checkRange(of configuration: WorkerConfiguration) throws(ConfigurationError)
}

extension Setting.Typed: ConfigurationSetting {
    public func apply(_ flag: String?, to configuration: inout WorkerConfiguration) throws(ConfigurationError) {
        guard let value = try resolve(flag) else { return }
        field.write(&configuration, value)
    }

    public func checkRange(of configuration: WorkerConfiguration) throws(ConfigurationError) {
        guard let value = field.read(configuration) else { return }
        try check(value)
    }
}

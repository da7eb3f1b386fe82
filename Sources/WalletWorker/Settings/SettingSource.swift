import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Where a setting's value comes from, for every command that reads the settings table (`wallet-worker`,
// `wallet-notify`): the flag if given, else the environment variable, else the file named by the variable with
// `_FILE` appended (a mounted secret, the convention of official container images), else nil (the default stays).
// The errors are `ConfigurationError`s naming where the value came from; the commands report them as usage errors.

extension Setting.Typed {
    /// One setting's value: the flag if given, else the environment variable, else the file `<variable>_FILE` names,
    /// parsed (and, for a range checked when parsed, in range); nil when none is given (the default stays). A value
    /// that does not parse is an error naming where it came from.
    public func resolve(_ flag: String?) throws(ConfigurationError) -> Value? {
        guard let (source, text) = try Setting.source(of: flag, flagName, setting.variable) else { return nil }
        guard let value = parse(text) else {
            if let reason = reason?(text) { throw ConfigurationError("\(source): \(reason)") }
            throw ConfigurationError("\(source) \"\(text)\": expected \(expected)")
        }
        return value
    }
}

extension Setting {
    /// Where a setting comes from and its text: the flag, the variable, or the file `<variable>_FILE` names (its
    /// content without the trailing newline).
    public static func source(
        of flag: String?, _ flagName: String, _ variable: String
    ) throws(ConfigurationError) -> (source: String, text: String)? {
        let environment = ProcessInfo.processInfo.environment
        if let flag { return (flagName, flag) }
        if let value = environment[variable], !value.isEmpty { return (variable, value) }
        let fileVariable = variable + "_FILE"
        guard let path = environment[fileVariable], !path.isEmpty else { return nil }
        let contents: String
        do {
            contents = try readSettingFile(path)
        } catch {
            throw ConfigurationError("\(fileVariable): cannot read \(path): \(error.reason)")
        }
        var text = Substring(contents)
        while text.last == "\n" || text.last == "\r" { text = text.dropLast() }
        guard !text.isEmpty else { throw ConfigurationError("\(fileVariable): \(path) is empty") }
        return ("\(fileVariable) (\(path))", String(text))
    }
}

/// Why a setting's file could not be read, in the system's words (never its contents: it holds a secret).
struct SettingFileError: Error {
    var reason: String
}

/// The text of a `_FILE` setting. Foundation's own error for a directory or a missing file is "The operation could
/// not be completed" (NSCocoaErrorDomain 256): the reason is taken from the system call instead.
func readSettingFile(_ path: String) throws(SettingFileError) -> String {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        throw SettingFileError(reason: "no such file")
    }
    if isDirectory.boolValue {
        throw SettingFileError(reason: "it is a directory (name the file that holds the value, e.g. a Secret's key)")
    }
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { throw SettingFileError(reason: String(cString: strerror(errno))) }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4_096)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            bytes += buffer[0..<count]
            guard bytes.count <= 1 << 20 else { throw SettingFileError(reason: "it is over 1 MiB: not a setting") }
        } else if count == 0 {
            break
        } else if errno != EINTR {
            throw SettingFileError(reason: String(cString: strerror(errno)))
        }
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
        throw SettingFileError(reason: "it is not UTF-8 text")
    }
    return text
}

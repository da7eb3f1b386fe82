import Foundation

/// The SQLite file holds push tokens and card state: only its owner may read it, whatever the process umask.
///
/// SQLite creates a missing database file with 0644 less the umask, so the file is created here first, empty, with
/// 0600 (`open` with 0600, then `fchmod`: a umask can only remove bits, and one such as 0277 would leave the owner
/// unable to write).
/// SQLite creates the `-wal`, `-shm` and `-journal` files with the database file's own mode (`robust_open` with
/// the mode of the main file, fchmod-ed past the umask), so they come out 0600 too.
///
/// A file that already exists with group or other bits (made by an older build, or copied in) is tightened to its
/// owner bits, and so are its `-wal`, `-shm` and `-journal` files when present; the store reports each change in
/// `SQLiteWalletStore.permissionWarnings` for the worker to log. Tightening rather than refusing: the data is
/// exposed for as long as the file stays readable, and the owner's own access does not change.
enum SQLiteFilePermissions {
    /// The mode of a file this store creates.
    static let createdMode: mode_t = 0o600

    /// Creates `path` (0600) when it is missing and tightens it and its companion files when they are readable by
    /// others. Returns a sentence per file it found too open, for a warning.
    ///
    /// Failures to create are left to SQLite, which reports them in its own words when it opens the file (a missing
    /// directory, no write access). `:memory:` and `file:` URIs are left alone.
    static func prepare(path: String) -> [String] {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return [] }
        let descriptor = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, createdMode)
        if descriptor >= 0 {
            _ = fchmod(descriptor, createdMode)
            close(descriptor)
            return []
        }
        guard errno == EEXIST else { return [] }
        return ([path] + ["-wal", "-shm", "-journal"].map { path + $0 }).compactMap(tighten)
    }

    /// Removes the group and other bits of `path`, if it exists and has any.
    private static func tighten(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & 0o077 != 0 else { return nil }
        let name = URL(fileURLWithPath: path).lastPathComponent
        let found = String(status.st_mode & 0o777, radix: 8)
        let tightened = status.st_mode & 0o700
        guard chmod(path, tightened) == 0 else {
            return "\(name) is readable by other users (mode \(found)) and could not be restricted to its owner: "
                + String(cString: strerror(errno))
        }
        return "\(name) was readable by other users (mode \(found)): restricted to its owner (mode "
            + "\(String(tightened, radix: 8)))"
    }
}

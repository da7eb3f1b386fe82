import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A line to stdout; false once the reader has gone (`| head`).
public func printLine(_ line: String) throws -> Bool {
    try StandardOutput.write(Array((line + "\n").utf8))
}

/// A line to stderr: progress and diagnostics, kept out of what a pipe reads.
public func progressLine(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// stdout for `route`, written with write(2) so that a reader that went away (`| head`: EPIPE, with SIGPIPE
/// ignored) is told apart from a failure such as a full disk. Foundation's `FileHandle.write` traps on both.
public enum StandardOutput {
    public struct WriteFailed: Error, CustomStringConvertible {
        public var errorNumber: Int32
        public var description: String { "writing to stdout failed: \(String(cString: strerror(errorNumber)))" }
    }

    /// Writes all of `bytes`; false when the reader has gone (nothing more can be shown).
    public static func write(_ bytes: [UInt8]) throws(WriteFailed) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                Glibc.write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written >= 0 {
                offset += written
            } else if errno == EINTR {
                continue
            } else if errno == EPIPE {
                return false
            } else {
                throw WriteFailed(errorNumber: errno)
            }
        }
        return true
    }
}

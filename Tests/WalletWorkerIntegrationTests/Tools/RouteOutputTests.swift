// `wallet-worker route` when its output cannot be written: a reader that went away is normal, a failure is not.
import Foundation
import Testing

@Suite("wallet-worker route: its stdout") struct RouteOutputTests {
    /// Found in use: with SIGPIPE ignored (as many supervisors and CI runners leave it), `route … | head` crashed
    /// with SIGILL on Foundation's `FileHandle.write`.
    @Test("the reader going away (| head) ends route quietly, exit 0")
    func aReaderThatGoesAwayIsNotAFailure() async throws {
        try await withRouteInput(lines: 2_000) { executable, input, directory in
            // A pipe to `head -c 1`: after its one byte nobody reads, and the next writes fail with EPIPE.
            let script =
                #"trap '' PIPE; "$0" route --store memory < "$1" | head -c 1 > /dev/null; exit "${PIPESTATUS[0]}""#
            let status = try await RouteCommand.spawnAndWait(
                arguments: ["/bin/bash", "-c", script, executable, input], stdin: "/dev/null",
                stdout: directory + "/out.txt", stderr: directory + "/err.txt")
            let stderr = (try? String(contentsOfFile: directory + "/err.txt", encoding: .utf8)) ?? ""
            #expect(status == 0, "route exited with \(status): \(stderr.prefix(2_000))")
        }
    }

    @Test("a write that fails (a full disk) exits non-zero and says why")
    func aFailedWriteIsReported() async throws {
        try await withRouteInput(lines: 10) { executable, input, directory in
            let status = try await RouteCommand.spawnAndWait(
                arguments: [executable, "route", "--store", "memory"], stdin: input, stdout: "/dev/full",
                stderr: directory + "/err.txt")
            let stderr = (try? String(contentsOfFile: directory + "/err.txt", encoding: .utf8)) ?? ""
            #expect(status == 1, "route exited with \(status): \(stderr.prefix(2_000))")
            #expect(stderr.contains("writing to stdout failed: No space left on device"), "\(stderr.prefix(2_000))")
        }
    }

    /// `lines` action notifications (each prints a result line of about 400 bytes) in a temporary file.
    private func withRouteInput(
        lines: Int, _ body: (_ executable: String, _ input: String, _ directory: String) async throws -> Void
    ) async throws {
        let executable = try WorkerProcess.executablePath
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("wnw-route-output-\(UInt64.random(in: 0...UInt64.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let input = directory + "/in.jsonl"
        let text =
            (0..<lines).map {
                #"{"properties":{"messageId":"m-\#($0)"},"body":{"action":"refreshWallet","aps":{"content-available":1}}}"#
            }.joined(separator: "\n") + "\n"
        try Data(text.utf8).write(to: URL(fileURLWithPath: input))
        try await body(executable, input, directory)
    }
}

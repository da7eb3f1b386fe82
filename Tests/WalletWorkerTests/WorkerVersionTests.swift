import AMQPTransport
import Testing

@testable import WalletWorker

/// Issue 15, part 4: which build is running, for dashboards and alerts during a rollout.
@Suite struct WorkerVersionTests {
    @Test func buildInfoIsOneWithTheVersionsInItsLabels() throws {
        let exposition = String(decoding: WorkerMetrics().exposition(), as: UTF8.self)
        let line = try #require(exposition.split(separator: "\n").first { $0.hasPrefix("wallet_build_info{") })
        #expect(line.hasSuffix(" 1") || line.hasSuffix(" 1.0"), "\(line)")
        #expect(line.contains(#"version="\#(WorkerVersion.current)""#), "\(line)")
        #expect(line.contains(#"librabbitmq="\#(AMQPLibrary.version)""#), "\(line)")
    }

    @Test func theLibraryVersionIsTheOneLoaded() {
        // Debian 12's librabbitmq is 0.11.0; newer ones are fine too, but it is a dotted version, never empty.
        let parts = AMQPLibrary.version.split(separator: ".")
        #expect(
            parts.count >= 3 && parts.allSatisfy { Int($0.prefix(while: \.isNumber)) != nil }, "\(AMQPLibrary.version)")
        #expect(WorkerVersion.description.contains("librabbitmq \(AMQPLibrary.version)"))
    }
}

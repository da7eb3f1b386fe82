import TestSupport
import Testing

@testable import WalletWorker

@Suite struct ReconnectBackoffTests {
    /// The largest of many draws approaches the attempt's ceiling from below; the smallest is near zero (full jitter).
    @Test(arguments: [
        (1, Duration.milliseconds(500)), (2, .seconds(1)), (3, .seconds(2)), (7, .seconds(30)), (40, .seconds(30)),
    ])
    func drawsAreUniformUpToTheCeiling(attempt: Int, ceiling: Duration) {
        var generator = SplitMix64(seed: 42)
        let draws = (0..<2_000).map { _ in ReconnectBackoff().delay(attempt: attempt, using: &generator) }
        #expect(draws.allSatisfy { $0 >= .zero && $0 <= ceiling })
        #expect(draws.max()! > ceiling * 0.95)
        #expect(draws.min()! < ceiling * 0.05)
    }
}

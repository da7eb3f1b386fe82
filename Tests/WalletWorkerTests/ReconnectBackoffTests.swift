import Testing

@testable import WalletWorker

@Suite struct ReconnectBackoffTests {
    /// SplitMix64: deterministic and well spread (a constant generator would make `random(in:)` reject forever).
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The largest of many draws approaches the attempt's ceiling from below; the smallest is near zero (full jitter).
    @Test(arguments: [(1, Duration.milliseconds(500)), (2, .seconds(1)), (3, .seconds(2)), (7, .seconds(30)), (40, .seconds(30))])
    func drawsAreUniformUpToTheCeiling(attempt: Int, ceiling: Duration) {
        var generator = SplitMix64(state: 42)
        let draws = (0..<2_000).map { _ in ReconnectBackoff().delay(attempt: attempt, using: &generator) }
        #expect(draws.allSatisfy { $0 >= .zero && $0 <= ceiling })
        #expect(draws.max()! > ceiling * 0.95)
        #expect(draws.min()! < ceiling * 0.05)
    }
}

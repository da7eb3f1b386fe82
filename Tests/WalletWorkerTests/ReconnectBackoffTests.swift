import Testing

@testable import WalletWorker

@Suite struct ReconnectBackoffTests {
    struct Fixed: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    @Test func growsExponentiallyUpToTheMaximum() {
        let backoff = ReconnectBackoff()
        var top = Fixed(value: .max)  // the largest fraction the generator can give
        let ceilings = (1...10).map { backoff.delay(attempt: $0, using: &top) }
        #expect(ceilings[0] <= .milliseconds(500))
        #expect(ceilings[1] <= .seconds(1) && ceilings[1] > .milliseconds(900))
        #expect(ceilings[2] <= .seconds(2) && ceilings[2] > .milliseconds(1_900))
        #expect(ceilings[9] <= .seconds(30) && ceilings[9] > .seconds(29))
    }

    @Test func fullJitterCanBeShort() {
        var bottom = Fixed(value: 0)
        #expect(ReconnectBackoff().delay(attempt: 8, using: &bottom) == .zero)
    }
}

import Testing
import WalletWorker

@Suite struct DurationTextTests {
    @Test(arguments: [
        ("250ms", Duration.milliseconds(250)), ("5s", .seconds(5)), ("1.5s", .milliseconds(1_500)),
        ("10m", .seconds(600)), ("24h", .seconds(86_400)), ("7", .seconds(7)), (" 2s ", .seconds(2)),
    ])
    func parses(text: String, expected: Duration) {
        #expect(DurationText.parse(text) == expected)
    }

    @Test(arguments: ["", "s", "five", "-1s", "1d", "nan", "inf"])
    func refuses(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    /// Issue 24, item 11: `--older-than 1e17h` or a huge `WALLET_RETRY_DELAY_MAX` trapped converting to Int64
    /// (on main this test crashes the test process); now they are out of range, a clear error at the flag.
    @Test(arguments: ["1e17h", "1e300", "9223372036854775807s", "87601h", "1e16ms"])
    func refusesWhatWouldOverflowInsteadOfTrapping(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test func acceptsUpToTenYears() {
        #expect(DurationText.parse("87600h") == .seconds(87_600 * 3_600))
    }

    /// Issue 25: log lines said `in=6.09728623534594 seconds`; they say what `parse` reads back.
    @Test(arguments: [
        (Duration.milliseconds(250), "250ms"), (.seconds(6.09728623534594), "6.1s"), (.seconds(5), "5s"),
        (.seconds(90), "90s"), (.seconds(750), "12.5m"), (.seconds(11_520), "3.2h"), (.zero, "0ms"),
    ])
    func formats(duration: Duration, expected: String) {
        #expect(DurationText.format(duration) == expected)
        #expect(
            DurationText.parse(expected).map { abs(($0 - duration).secondsDouble) <= duration.secondsDouble * 0.05 }
                ?? false)
    }
}

extension Duration {
    fileprivate var secondsDouble: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

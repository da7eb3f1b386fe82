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
}

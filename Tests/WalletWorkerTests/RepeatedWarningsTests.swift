import Logging
import TestSupport
import Testing

@testable import WalletWorker

/// A storm of the same warning is written once, then summarised at most once per interval (issue 36: a 90 s
/// downstream redeploy wrote 8,774 warning lines).
@Suite struct RepeatedWarningsTests {
    let returned = RepeatedWarnings.Kind("publish not confirmed")
    let requeued = RepeatedWarnings.Kind("requeued")

    @Test func theFirstOfAKindIsWrittenAndTheRestOfTheIntervalHeldBack() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        #expect(warnings.occurred(returned, now: .seconds(10)) == .write(heldBack: 0, over: .zero))
        for second in 11..<70 {
            #expect(warnings.occurred(returned, now: .seconds(second)) == .holdBack)
        }
        // 60 s after the line written: the next one is written, with the count of those held back.
        #expect(warnings.occurred(returned, now: .seconds(70)) == .write(heldBack: 59, over: .seconds(60)))
        #expect(warnings.occurred(returned, now: .seconds(71)) == .holdBack)
    }

    @Test func aKindWithABurstWritesThatManyLinesAnIntervalThenHoldsBack() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        let rejected = RepeatedWarnings.Kind("rejected and dead-lettered", burst: 3)
        for second in 0..<3 {
            #expect(warnings.occurred(rejected, now: .seconds(second)) == .write(heldBack: 0, over: .zero))
        }
        for second in 3..<60 { #expect(warnings.occurred(rejected, now: .seconds(second)) == .holdBack) }
        // The interval runs from its first line: the next one, 60 s after it, carries the count; a new burst begins.
        #expect(warnings.occurred(rejected, now: .seconds(60)) == .write(heldBack: 57, over: .seconds(60)))
        #expect(warnings.occurred(rejected, now: .seconds(61)) == .write(heldBack: 0, over: .zero))
        #expect(warnings.occurred(rejected, now: .seconds(62)) == .write(heldBack: 0, over: .zero))
        #expect(warnings.occurred(rejected, now: .seconds(63)) == .holdBack)
        #expect(
            warnings.dueSummaries(now: .seconds(120))
                == [RepeatedWarnings.Summary(kind: rejected, heldBack: 1, over: .seconds(60))])
    }

    @Test func eachKindHasItsOwnInterval() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        #expect(warnings.occurred(returned, now: .seconds(0)) == .write(heldBack: 0, over: .zero))
        #expect(warnings.occurred(requeued, now: .seconds(1)) == .write(heldBack: 0, over: .zero))
        #expect(warnings.occurred(returned, now: .seconds(2)) == .holdBack)
        #expect(warnings.occurred(requeued, now: .seconds(3)) == .holdBack)
    }

    @Test func aStormThatEndsIsSummarisedOnceByTheFlush() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        _ = warnings.occurred(returned, now: .seconds(0))
        for _ in 0..<8_773 { _ = warnings.occurred(returned, now: .seconds(30)) }
        #expect(warnings.dueSummaries(now: .seconds(59)).isEmpty)
        #expect(
            warnings.dueSummaries(now: .seconds(60))
                == [RepeatedWarnings.Summary(kind: returned, heldBack: 8_773, over: .seconds(60))])
        // Reported once; the kind starts afresh.
        #expect(warnings.dueSummaries(now: .seconds(200)).isEmpty)
        #expect(warnings.occurred(returned, now: .seconds(201)) == .write(heldBack: 0, over: .zero))
    }

    @Test func aKindThatWentQuietWithNothingHeldBackIsForgottenSilently() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        _ = warnings.occurred(returned, now: .seconds(0))
        #expect(warnings.dueSummaries(now: .seconds(61)).isEmpty)
        #expect(warnings.occurred(returned, now: .seconds(62)) == .write(heldBack: 0, over: .zero))
    }

    @Test func theStopReportsWhatIsHeldBackWhateverItsInterval() {
        var warnings = RepeatedWarnings(interval: .seconds(60))
        _ = warnings.occurred(returned, now: .seconds(0))
        _ = warnings.occurred(returned, now: .seconds(1))
        _ = warnings.occurred(requeued, now: .seconds(2))
        #expect(
            warnings.remainingSummaries(now: .seconds(5))
                == [RepeatedWarnings.Summary(kind: returned, heldBack: 1, over: .seconds(5))])
        #expect(warnings.remainingSummaries(now: .seconds(6)).isEmpty)
    }

    /// Whatever the order of occurrences and flushes, every occurrence is either written or counted in exactly one
    /// line or summary after it: nothing is lost from the log's account, and nothing counted twice.
    @Test(arguments: [UInt64(1), 2, 3, 42, 2026])
    func everyOccurrenceIsAccountedForExactlyOnce(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var warnings = RepeatedWarnings(interval: .seconds(10))
        let kinds = [returned, requeued, RepeatedWarnings.Kind("sent to the retry queue", burst: 4)]
        var now = Duration.zero
        var occurrences = 0
        var accounted = 0
        for _ in 0..<5_000 {
            now += .milliseconds(Int64.random(in: 0...500, using: &random))
            if Int.random(in: 0..<20, using: &random) == 0 {
                accounted += warnings.dueSummaries(now: now).reduce(0) { $0 + $1.heldBack }
                continue
            }
            occurrences += 1
            switch warnings.occurred(kinds.randomElement(using: &random)!, now: now) {
            case .write(let heldBack, _): accounted += 1 + heldBack
            case .holdBack: break
            }
        }
        accounted += warnings.remainingSummaries(now: now).reduce(0) { $0 + $1.heldBack }
        #expect(accounted == occurrences)
    }
}

/// What the log says of a storm: the first line, then one per interval with the count held back, then the flush.
@Suite struct WarningStormsTests {
    @Test func aStormOfReturnedResultsIsThreeLinesWithExactCounts() {
        let clock = ManualClock()
        let storms = WarningStorms(interval: .seconds(60), clock: WorkerClock(clock))
        let captured = CapturedLog()
        var logger = Logger(label: "storm") { _ in CapturedLog.Handler(captured) }
        logger.logLevel = .info
        for n in 0..<8_775 {
            if n == 8_774 { clock.advance(by: .seconds(60)) }
            storms.log(.publishNotConfirmed, "publish not confirmed", metadata: ["message_id": "m-\(n)"], to: logger)
        }
        storms.log(.publishNotConfirmed, "publish not confirmed", metadata: ["message_id": "last"], to: logger)
        clock.advance(by: .seconds(60))
        storms.flush(to: logger)
        let lines = captured.texts
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.first?.contains("message_id") == true && lines.first?.contains("m-0") == true)
        #expect(
            lines.dropFirst().first?.contains("publish not confirmed (and 8,773 more like it in the last 60s)") == true,
            "\(lines)")
        #expect(lines.last?.contains("publish not confirmed: 1 more like it") == true, "\(lines)")
    }

    @Test func belowTheLoggersLevelNothingIsCountedOrBuilt() {
        let storms = WarningStorms(interval: .seconds(60), clock: WorkerClock(ManualClock()))
        let captured = CapturedLog()
        var logger = Logger(label: "storm") { _ in CapturedLog.Handler(captured) }
        logger.logLevel = .error
        storms.log(.publishNotConfirmed, "publish not confirmed", metadata: ["built": "yes"], to: logger)
        logger.logLevel = .info
        // The first line the logger lets through is the first of its storm.
        storms.log(.publishNotConfirmed, "publish not confirmed", metadata: [:], to: logger)
        #expect(captured.texts.count == 1)
        #expect(captured.texts.first?.contains("more like it") == false)
    }

    @Test(arguments: [(0, "0"), (7, "7"), (999, "999"), (1_000, "1,000"), (8_773, "8,773"), (1_234_567, "1,234,567")])
    func countsAreGroupedByThousands(count: Int, text: String) {
        #expect(WarningStorms.grouped(count) == text)
    }
}

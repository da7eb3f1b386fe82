import Testing

@testable import WalletWorker

/// The processing lag is measured from the inbound AMQP `timestamp`, which has whole seconds only: its buckets
/// are whole seconds too (a 10 ms bucket would only count rounding), from 1 s to an hour.
@Suite struct ProcessingLagBucketsTests {
    @Test func theBucketsAreWholeSecondsFromOneSecondToAnHour() throws {
        let exposition = String(decoding: WorkerMetrics().exposition(), as: UTF8.self)
        let bounds = exposition.split(separator: "\n")
            .filter { $0.hasPrefix("wallet_processing_lag_seconds_bucket{") }
            .compactMap { line -> Double? in
                guard let start = line.range(of: #"le=""#), let end = line[start.upperBound...].firstIndex(of: "\"")
                else { return nil }
                return Double(line[start.upperBound..<end])
            }
            .filter(\.isFinite)
        #expect(bounds.first == 1 && bounds.last == 3_600, "\(bounds)")
        #expect(bounds.allSatisfy { $0 == $0.rounded() }, "\(bounds)")
    }
}

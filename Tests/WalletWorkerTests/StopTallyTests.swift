import Testing

@testable import WalletWorker

/// The worker's last line says what its stop left behind, as it is (issue 37: it claimed every batch acknowledged
/// when it had taken none, and when it had given batches back).
@Suite struct StopTallyTests {
    @Test func aWorkerThatTookNothingSaysSo() {
        let tally = StopTally()
        tally.stopRequested()
        #expect(tally.stoppedLine == "stopped before taking any delivery")
    }

    @Test func everythingFinishedAfterTheStopIsEveryBatchAcknowledged() {
        let tally = StopTally()
        tally.received(10)
        // Given back before the stop (a store outage's give-back): not what the stop left behind.
        tally.gaveBack(4)
        tally.stopRequested()
        #expect(tally.stoppedLine == "stopped: every batch in hand acknowledged")
    }

    @Test func whatTheStopGaveBackIsCounted() {
        let tally = StopTally()
        tally.received(10)
        tally.gaveBack(1)
        tally.stopRequested()
        tally.gaveBack(3)
        // A second request (cancellation after the grace period) does not move the mark.
        tally.stopRequested()
        tally.gaveBack(2)
        #expect(
            tally.stoppedLine
                == "stopped: 5 deliveries given back to the queue for the broker to deliver again, the rest in hand acknowledged"
        )
    }
}

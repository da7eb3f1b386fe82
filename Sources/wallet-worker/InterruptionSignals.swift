import Dispatch
import WalletOperatorTools
import WalletWorker

#if canImport(Glibc)
    import Glibc
#endif

/// SIGINT and SIGTERM while a `dead-letters` command walks the queue: the first asks the walk to stop between two
/// messages (`WalkInterruption`), after which the command prints its closing line and exits 130; a second ends the
/// process at once (130), which may leave the one replay or the copies in flight done and their dead letters still
/// in place.
final class InterruptionSignals {
    private let sources: [any DispatchSourceSignal]
    private static let numbers = [SIGINT, SIGTERM]

    init(_ interruption: WalkInterruption) {
        sources = Self.numbers.map { number in
            // The default action would end the process before the handler runs.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if interruption.isRequested { _exit(ExitStatus.interrupted.rawValue) }
                interruption.request()
                progressLine(
                    "interrupted: stopping after the dead letter in hand (interrupt again to quit at once, which may "
                        + "leave a dead letter that was just replayed or copied in place)")
            }
            source.resume()
            return source
        }
    }

    /// The default actions again (once the walk is over).
    func cancel() {
        for source in sources { source.cancel() }
        for number in Self.numbers { signal(number, SIG_DFL) }
    }
}

import Synchronization
import Testing

@testable import WalletWorker

/// `LifecycleDriver` hands each action to its pipeline in the machine's order: through the inbox, or run at once by
/// the session's `DirectActions` only when the pipeline has nothing older in hand. The inputs here return chosen
/// actions, so each case says exactly what the driver was given.
@Suite("Lifecycle driver: actions in the machine's order")
struct LifecycleDriverTests {
    private let session = DeliveryLifecycle.SessionID(pipeline: 0, number: 1)

    private func makeDriver() -> LifecycleDriver {
        let harness = LifecycleHarness()
        return LifecycleDriver(harness.machine, pipelines: 1, clock: .continuous)
    }

    /// Records what the direct path ran; runs settles and reports of `session`, nothing else.
    private final class DirectLog: Sendable {
        let ran = Mutex<[String]>([])
        let session: DeliveryLifecycle.SessionID

        init(session: DeliveryLifecycle.SessionID) { self.session = session }

        func run(_ action: LifecycleAction) -> Bool {
            switch action {
            case .settle(let id, let settlements) where id == session:
                ran.withLock { $0.append(describe(settlements)) }
                return true
            default:
                return false
            }
        }

        var lines: [String] { ran.withLock { $0 } }
    }

    /// The actions waiting in pipeline 0's inbox, as the driver's `finish` ends it.
    private func inbox(_ driver: LifecycleDriver) async -> [String] {
        driver.finish()
        var lines: [String] = []
        for await action in driver.inboxes[0] {
            switch action {
            case .settle(_, let settlements): lines.append(describe(settlements))
            case .cancelConsumer: lines.append("cancelConsumer")
            default: lines.append("other")
            }
        }
        return lines
    }

    @Test func withoutASessionEveryActionGoesToTheInbox() async {
        let driver = makeDriver()
        let session = session
        driver.handle { _, _ in [.settle(session, [.ack(tag: 1, multiple: false)])] }
        #expect(await inbox(driver) == ["ack 1"])
    }

    @Test func withNothingInHandADirectActionRunsAtOnce() async {
        let driver = makeDriver()
        let log = DirectLog(session: session)
        driver.runDirectly(in: 0) { log.run($0) }
        let session = session
        driver.handle { _, _ in [.settle(session, [.ack(tag: 1, multiple: false)])] }
        #expect(log.lines == ["ack 1"])
        #expect(await inbox(driver).isEmpty)
    }

    @Test func aDirectActionWaitsBehindAnOlderOneInTheInbox() async {
        let driver = makeDriver()
        let log = DirectLog(session: session)
        driver.runDirectly(in: 0) { log.run($0) }
        let session = session
        // The cancel cannot run directly: it goes to the inbox, and the settle after it must not overtake it.
        driver.handle { _, _ in
            [.cancelConsumer(session), .settle(session, [.ack(tag: 2, multiple: false)])]
        }
        #expect(log.lines.isEmpty)
        // The pipeline has run both: the next settle runs at once again.
        driver.ran(in: 0)
        driver.ran(in: 0)
        driver.handle { _, _ in [.settle(session, [.ack(tag: 3, multiple: false)])] }
        #expect(log.lines == ["ack 3"])
        #expect(await inbox(driver) == ["cancelConsumer", "ack 2"])
    }

    @Test func anotherSessionsActionAndAClearedSessionGoToTheInbox() async {
        let driver = makeDriver()
        let log = DirectLog(session: session)
        driver.runDirectly(in: 0) { log.run($0) }
        let stale = DeliveryLifecycle.SessionID(pipeline: 0, number: 0)
        driver.handle { _, _ in [.settle(stale, [.ack(tag: 1, multiple: false)])] }
        driver.ran(in: 0)
        driver.runDirectly(in: 0, nil)
        let session = session
        driver.handle { _, _ in [.settle(session, [.ack(tag: 2, multiple: false)])] }
        #expect(log.lines.isEmpty)
        #expect(await inbox(driver).count == 2)
    }
}

extension LifecycleDriverTests {
    /// A count the inputs bump while the machine's lock is held: the machine's own order.
    private final class MachineOrder: @unchecked Sendable {
        var next: UInt64 = 0
    }

    /// Eight tasks give 400 inputs each at once; every input's action carries the order the machine gave it.
    private func feedAtOnce(_ driver: LifecycleDriver) async {
        let order = MachineOrder()
        let session = session
        await withDiscardingTaskGroup { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<400 {
                        driver.handle { _, _ in
                            order.next += 1
                            return [.settle(session, [.ack(tag: order.next, multiple: false)])]
                        }
                    }
                }
            }
        }
    }

    @Test func actionsHandedOverOutsideTheLockKeepTheMachinesOrderRunDirectly() async {
        let driver = makeDriver()
        let log = DirectLog(session: session)
        driver.runDirectly(in: 0) { log.run($0) }
        await feedAtOnce(driver)
        #expect(log.lines == (1...3_200).map { "ack \($0)" })
    }

    @Test func actionsHandedOverOutsideTheLockKeepTheMachinesOrderInTheInbox() async {
        let driver = makeDriver()
        await feedAtOnce(driver)
        #expect(await inbox(driver) == (1...3_200).map { "ack \($0)" })
    }
}

/// "ack 1", "requeue 2", "reject 3": one settlement per line is enough here.
private func describe(_ settlements: [Settlement]) -> String {
    settlements.map {
        switch $0 {
        case .ack(let tag, _): "ack \(tag)"
        case .requeue(let tag): "requeue \(tag)"
        case .reject(let tag): "reject \(tag)"
        }
    }.joined(separator: ", ")
}

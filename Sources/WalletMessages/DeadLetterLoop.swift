/// The dead-letter queue's loop: a fanout exchange bound to that queue alone, which is also the queue's own
/// dead-letter exchange. The worker declares it (`Topology`); `wallet-worker dead-letters` moves the messages it keeps
/// back to the queue's tail through it.
public enum DeadLetterLoop {
    /// The loop exchange of a dead-letter queue: its name with `.loop` appended.
    public static func exchange(of queue: String) -> String { queue + ".loop" }
}

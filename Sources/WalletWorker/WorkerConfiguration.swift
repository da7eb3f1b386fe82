// The worker's settings; filled in by the worker issue.
public struct WorkerConfiguration: Sendable {
    public init() {}
}

/// Memory for the values a statement binds, owned by one batch's transaction and reused statement after statement.
///
/// SQLite copies a value bound with `SQLITE_TRANSIENT` into a buffer of its own, and frees that buffer when the
/// parameter is bound again: a `malloc` and a `free` for every text and blob of every statement, about fifteen per
/// message. Copied here first and bound with `SQLITE_STATIC`, SQLite reads them in place: the arena is allocated
/// once per batch. A value that does not fit (a large recorded result) is bound the transient way.
///
/// Used like a stack: `DirectStatement` takes a mark before binding and releases back to it once the statement has
/// been reset and its bindings cleared, so SQLite never holds a pointer into space handed out again. One thread at a
/// time: the batch's, inside GRDB's access block.
final class BindingArena {
    private let storage: UnsafeMutableRawBufferPointer
    private var used = 0

    init(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit {
        storage.deallocate()
    }

    /// Where the bytes handed out so far end: release back to it when their statement is done.
    var mark: Int { used }

    /// A copy of `bytes` that stays valid until `release(to:)` a mark taken before; nil when it does not fit.
    func copy(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        guard bytes.count <= storage.count - used, let destination = storage.baseAddress?.advanced(by: used) else {
            return nil
        }
        if let source = bytes.baseAddress, !bytes.isEmpty {
            destination.copyMemory(from: source, byteCount: bytes.count)
        }
        used += bytes.count
        return UnsafeRawPointer(destination)
    }

    /// Gives back everything handed out since `mark`.
    func release(to mark: Int) {
        used = min(used, mark)
    }
}

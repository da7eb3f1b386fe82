internal import CRabbitMQ

/// A librabbitmq memory pool owned by Swift: everything encoded into it for one library call
/// (strings, tables, properties) lives until the pool is dropped. Used only on the connection's thread.
final class CMemoryPool {
    let pool: UnsafeMutablePointer<amqp_pool_t>

    init(pageSize: Int = 4096) {
        pool = .allocate(capacity: 1)
        init_amqp_pool(pool, pageSize)
    }

    deinit {
        empty_amqp_pool(pool)
        pool.deallocate()
    }

    /// Copies the bytes into the pool. Empty input gives `amqp_empty_bytes`.
    func bytes(_ source: some Collection<UInt8>) -> amqp_bytes_t {
        guard !source.isEmpty else { return amqp_empty_bytes }
        var bytes = amqp_bytes_t()
        amqp_pool_alloc_bytes(pool, source.count, &bytes)
        guard let destination = bytes.bytes else { fatalError("librabbitmq pool allocation failed (out of memory)") }
        let buffer = UnsafeMutableRawBufferPointer(start: destination, count: source.count)
        buffer.copyBytes(from: source)
        return bytes
    }

    func bytes(_ string: String) -> amqp_bytes_t {
        bytes(string.utf8)
    }

    func allocate<T>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        guard let raw = amqp_pool_alloc(pool, MemoryLayout<T>.stride * max(count, 1)) else {
            fatalError("librabbitmq pool allocation failed (out of memory)")
        }
        return raw.bindMemory(to: T.self, capacity: max(count, 1))
    }
}

extension amqp_bytes_t {
    /// The bytes in place (valid while librabbitmq keeps them).
    var buffer: UnsafeBufferPointer<UInt8> {
        guard len > 0, let bytes else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: bytes.assumingMemoryBound(to: UInt8.self), count: len)
    }

    /// Copies the bytes out of C memory.
    var array: [UInt8] { Array(buffer) }

    /// Decodes the bytes as UTF-8, repairing invalid sequences (AMQP short strings are meant to be UTF-8).
    var string: String { String(decoding: buffer, as: UTF8.self) }
}

/// Runs `body` with an `amqp_bytes_t` that borrows the array's storage. Do not let the value escape.
func withBorrowedBytes<R>(_ array: [UInt8], _ body: (amqp_bytes_t) throws(AMQPError) -> R) throws(AMQPError) -> R {
    var result: Result<R, AMQPError>!
    array.withUnsafeBytes { buffer in
        let bytes = amqp_bytes_t(len: buffer.count, bytes: UnsafeMutableRawPointer(mutating: buffer.baseAddress))
        do { result = .success(try body(bytes)) } catch let error as AMQPError { result = .failure(error) } catch {
            fatalError("unreachable: typed throws")
        }
    }
    return try result.get()
}

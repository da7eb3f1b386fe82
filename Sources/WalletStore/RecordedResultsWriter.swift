import WalletRouting

/// Writes messages' recorded results (`RecordedResultsEncoding`) in the version a store's schema allows, reusing its
/// memory from message to message. A store keeps one for a batch: a message's value then costs no allocation of its
/// own (the version 1 blob, the compressor's text and table and the compressed value all stay in buffers kept for
/// the batch), where encoding each on its own cost four.
final class RecordedResultsWriter {
    private var plain: [UInt8] = []
    private let compressor: LZ4Block.Compressor?
    private var output: UnsafeMutableBufferPointer<UInt8>

    /// `compressing`: version 2, else version 1.
    init(compressing: Bool) {
        compressor = compressing ? LZ4Block.Compressor(dictionary: RecordedResultsDictionary.version2) : nil
        output = .allocate(capacity: compressing ? RecordedResultsEncoding.compressedBound(2_048) : 0)
    }

    deinit {
        output.deallocate()
    }

    /// Calls `body` with the value `results` are recorded as: bytes valid only during the call.
    func withValue<Result>(of results: [OutboundResult], _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows
        -> Result
    {
        plain.removeAll(keepingCapacity: true)
        RecordedResultsEncoding.appendUncompressed(results, to: &plain)
        guard let compressor else { return try plain.withUnsafeBytes(body) }
        let bound = RecordedResultsEncoding.compressedBound(plain.count)
        if output.count < bound {
            output.deallocate()
            output = .allocate(capacity: max(bound, 2 * output.count))
        }
        let written = plain.withUnsafeBytes { RecordedResultsEncoding.compress($0, with: compressor, into: output) }
        return try body(UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: output[..<written])))
    }
}

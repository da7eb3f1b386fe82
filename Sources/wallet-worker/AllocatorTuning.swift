#if canImport(Glibc)
    import Glibc
#endif

/// Keeps glibc's malloc from handing memory back to the kernel between batches.
///
/// Every batch allocates and frees the same few megabytes (deliveries, results, store rows). With glibc's defaults
/// the memory freed at the end of a batch goes back to the kernel (trim, madvise) and the next batch faults it in
/// again: about a tenth of the worker's CPU in the end-to-end benchmark (Benchmarks/JOURNAL.md, "Allocator
/// tuning"). The footprint is bounded by the prefetch, so keeping it costs little. GLIBC_TUNABLES naming malloc
/// settings wins: then nothing is changed here.
enum AllocatorTuning {
    static func apply() {
        #if canImport(Glibc)
            if let tunables = getenv("GLIBC_TUNABLES"), String(cString: tunables).contains("glibc.malloc.") { return }
            // Not in the Glibc module's headers; looked up rather than declared, so a libc without it is skipped.
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
            let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
            // <malloc.h>: M_TRIM_THRESHOLD -1, M_TOP_PAD -2, M_MMAP_THRESHOLD -3 (glibc's stable values).
            _ = mallopt(-1, 256 << 20)  // keep up to 256 MiB of free heap instead of trimming it
            _ = mallopt(-2, 16 << 20)  // grow the heap 16 MiB at a time
            _ = mallopt(-3, 32 << 20)  // allocate batch-sized buffers from the heap, not with mmap (glibc's maximum)
        #endif
    }
}

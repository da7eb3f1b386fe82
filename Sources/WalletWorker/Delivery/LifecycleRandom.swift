/// The lifecycle's only source of randomness (jitter of retry expirations and delays), seeded by whoever makes the
/// machine: from the system's generator in the worker, with a fixed seed in tests, so a run can be replayed. The
/// tracer draws its trace and span ids from one too (`WorkerTracer`). SplitMix64 (Steele, Lea and Flood, 2014).
struct LifecycleRandom: RandomNumberGenerator, Sendable, Hashable {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform draw from `0..<1`.
    mutating func fraction() -> Double {
        Double(next() >> 11) / Double(1 << 53)
    }
}

/// Which new spans are recorded and exported: the OpenTelemetry specification's built-in samplers
/// (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`). A pure decision over the trace id and the parent.
indirect enum TraceSampler: Hashable, Sendable {
    case alwaysOn
    case alwaysOff
    /// About `ratio` of the traces, decided by the trace id alone, so every process of a trace decides alike.
    case traceIDRatio(Double)
    /// The parent's decision when there is a parent (its `sampled` flag), `root`'s otherwise.
    case parentBased(root: TraceSampler)

    /// The specification's default.
    static let `default` = TraceSampler.parentBased(root: .alwaysOn)

    func shouldSample(traceID: TraceID, parent: SpanIdentity?) -> Bool {
        switch self {
        case .alwaysOn: return true
        case .alwaysOff: return false
        case .traceIDRatio(let ratio):
            // The OpenTelemetry Go SDK's rule (its `TraceIDRatioBased`): the trace id's last 8 bytes, read big-endian
            // and shifted right once, against the ratio's share of 2^63. A trace sampled at one ratio is sampled at
            // any higher one.
            guard ratio < 1 else { return true }
            guard ratio > 0 else { return false }
            let bound = UInt64(ratio * Double(UInt64(1) << 63))
            return traceID.low >> 1 < bound
        case .parentBased(let root):
            if let parent { return parent.isSampled }
            return root.shouldSample(traceID: traceID, parent: nil)
        }
    }

    /// The sampler `OTEL_TRACES_SAMPLER` names, with its ratio from `OTEL_TRACES_SAMPLER_ARG` (default 1.0).
    init(name: String?, argument: String?) throws(ConfigurationError) {
        func ratio() throws(ConfigurationError) -> Double {
            guard let argument else { return 1 }
            guard let ratio = Double(argument), (0...1).contains(ratio) else {
                throw ConfigurationError("OTEL_TRACES_SAMPLER_ARG \"\(argument)\": expected a ratio from 0 to 1")
            }
            return ratio
        }
        switch name?.lowercased() ?? "parentbased_always_on" {
        case "always_on": self = .alwaysOn
        case "always_off": self = .alwaysOff
        case "traceidratio": self = .traceIDRatio(try ratio())
        case "parentbased_always_on": self = .parentBased(root: .alwaysOn)
        case "parentbased_always_off": self = .parentBased(root: .alwaysOff)
        case "parentbased_traceidratio": self = .parentBased(root: .traceIDRatio(try ratio()))
        case let other:
            throw ConfigurationError(
                "OTEL_TRACES_SAMPLER \"\(other)\": expected always_on, always_off, traceidratio, parentbased_always_on, "
                    + "parentbased_always_off or parentbased_traceidratio")
        }
    }
}

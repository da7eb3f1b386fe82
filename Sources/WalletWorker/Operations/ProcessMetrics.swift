import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The standard `process_*` metrics every Prometheus client library exports (CPU, memory, open files, start
/// time), read from `/proc/self` at each scrape: swift-prometheus has no process collector. Names, types and units
/// are those of the Prometheus client libraries, so the usual dashboards and alerts apply unchanged. Linux only:
/// elsewhere the block is empty.
enum ProcessMetrics {
    /// The exposition lines, `# HELP` and `# TYPE` included; empty where `/proc` cannot be read.
    static func exposition() -> [UInt8] {
        guard let sample = read() else { return [] }
        var text = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Double) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(format(value))\n"
        }
        metric(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            sample.cpuSeconds)
        metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", sample.residentBytes)
        metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", sample.virtualBytes)
        if let openFiles = sample.openFiles {
            metric("process_open_fds", "gauge", "Number of open file descriptors.", openFiles)
        }
        if let maxFiles = sample.maxFiles {
            metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", maxFiles)
        }
        if let start = sample.startTime {
            metric(
                "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", start)
        }
        return Array(text.utf8)
    }

    struct Sample: Sendable, Hashable {
        var cpuSeconds: Double
        var residentBytes: Double
        var virtualBytes: Double
        var openFiles: Double?
        var maxFiles: Double?
        var startTime: Double?
    }

    static func read() -> Sample? {
        #if os(Linux)
            guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
                let fields = statFields(stat)
            else { return nil }
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
            // Fields after the command (`comm`, which may hold spaces and parentheses), numbered as proc(5) does from 3.
            func field(_ number: Int) -> Double? { Double(fields[number - 3]) }
            guard ticks > 0, let user = field(14), let system = field(15), let start = field(22),
                let virtual = field(23), let resident = field(24)
            else { return nil }
            var sample = Sample(
                cpuSeconds: (user + system) / ticks, residentBytes: resident * pageSize, virtualBytes: virtual)
            sample.openFiles = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map {
                Double($0.count)
            }
            var limit = rlimit()
            if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
                sample.maxFiles = Double(limit.rlim_cur)
            }
            if let boot = bootTime() { sample.startTime = boot + start / ticks }
            return sample
        #else
            return nil
        #endif
    }

    /// The fields of `/proc/self/stat` after `comm`: from the state (field 3) on.
    static func statFields(_ stat: String) -> [Substring]? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        return fields.count >= 22 ? fields : nil
    }

    /// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Whole numbers without a fraction, others in full precision (Prometheus' text format takes either).
    private static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

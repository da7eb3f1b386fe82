/// A metric's value in Prometheus's text exposition, summed over the series whose labels contain every one of
/// `labels` (`name="value"`); 0 when there is none. The one way tests read the worker's metrics.
public func metricValue(in exposition: String, _ name: String, labels: [String] = []) -> Double {
    var total = 0.0
    for line in exposition.split(separator: "\n") where !line.hasPrefix("#") {
        guard line.hasPrefix(name + "{") || line.hasPrefix(name + " ") else { continue }
        guard labels.allSatisfy({ line.contains($0) }) else { continue }
        if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { total += value }
    }
    return total
}

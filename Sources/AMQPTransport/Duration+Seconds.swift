extension Duration {
    /// Whole and fractional seconds: for C APIs that take `struct timeval` or seconds, for the broker's arguments
    /// in milliseconds, and for comparing with `Date` intervals. The one copy of it (every module imports this one).
    public var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

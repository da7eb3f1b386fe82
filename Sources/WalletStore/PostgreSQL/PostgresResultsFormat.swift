/// How a batch writes the recorded results, by which builds the schema still lets run: those that read the results
/// only as rows of `processed_results` (until v6) and those that cannot read a compressed value (until v7).
/// Read once, when the store prepares: a replica that started before `wallet-worker migrate
/// --retire-older-builds` applied a retirement writes for the older builds until it restarts.
struct PostgresResultsFormat: Sendable, Equatable {
    /// Each result as a row of `processed_results` too, beside the value.
    var rows: Bool
    /// The value compressed (`RecordedResultsEncoding`, version 2).
    var compressed: Bool

    /// What builds before each retirement need, until it is applied: the most they need.
    static let beforeAnyRetirement = PostgresResultsFormat(rows: true, compressed: false)

    init(rows: Bool, compressed: Bool) {
        self.rows = rows
        self.compressed = compressed
    }

    /// For a database with the `applied` migrations (`PostgresSchema.versionName`).
    init(applied: [String]) {
        rows = !applied.contains(PostgresSchema.versionName(PostgresSchema.resultRowsRetiredVersion))
        compressed = applied.contains(PostgresSchema.versionName(PostgresSchema.compressedResultsVersion))
    }
}

import PostgresNIO

/// A batch statement's text under the name it is prepared with on each connection.
protocol BatchStatementText {
    /// Unique among the worker's statements, and short: PostgreSQL cuts names at 63 bytes.
    static var name: String { get }
    static var sql: String { get }
}

/// One execution of a batch statement, prepared on its connection's first use and kept for the connection's life,
/// so PostgreSQL parses each statement once per connection instead of once per call, and after a few calls plans it
/// once too (a generic plan, kept until the tables' statistics change).
///
/// A generic plan is chosen once and then kept, whatever the table grows to; chosen while a table is a few pages
/// long it could be a whole-table scan, which every later call would repeat (Benchmarks/JOURNAL.md, "Issue 38:
/// tried and dropped"). The worker's sessions therefore run with `enable_seqscan` off
/// (`PostgresConnectionSettings.startupParameters`): every batch statement reads by key, so each has an index
/// plan, and the planner picks it even on an empty table.
struct PreparedBatchStatement<Text: BatchStatementText>: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static var name: String { Text.name }
    static var sql: String { Text.sql }

    let bindings: PostgresBindings

    init(_: Text.Type, _ bindings: PostgresBindings) {
        self.bindings = bindings
    }

    func makeBindings() -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

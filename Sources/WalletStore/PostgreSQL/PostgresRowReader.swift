import PostgresNIO

/// Reads a row's columns in order, each decoded as a concrete type.
///
/// PostgresNIO's tuple decoding (`row.decode((String, Int?, …).self)`) runs through variadic generics that the
/// compiler leaves unspecialized: a generic call and type-metadata lookups for every cell. On a batch's history rows
/// (about 100 rows of 16 columns) that was 7.5% of the worker's samples on PostgreSQL (Benchmarks/README.md,
/// "Issue 38, continued: five round trips"). Here each call is specialized for the type it asks for.
struct PostgresRowReader {
    private var cells: PostgresRow.Iterator

    init(_ row: PostgresRow) {
        cells = row.makeIterator()
    }

    /// A row with fewer columns than its reader reads: a statement and its decoding out of step, the same every time
    /// (a NULL where a value must be is PostgresNIO's `PostgresDecodingError`, permanent too).
    static let missingColumn = StoreError(
        .permanent, "PostgreSQL store: a row has fewer columns than this build reads from the statement")

    /// The next column's value, or nil when it is NULL.
    mutating func next<Value: PostgresDecodable>(_: Value.Type = Value.self) throws -> Value? {
        guard let cell = cells.next() else { throw Self.missingColumn }
        guard cell.bytes != nil else { return nil }
        return try cell.decode(Value.self)
    }

    /// The next column's value, which must not be NULL.
    mutating func required<Value: PostgresDecodable>(_: Value.Type = Value.self) throws -> Value {
        guard let cell = cells.next() else { throw Self.missingColumn }
        return try cell.decode(Value.self)
    }
}

import GRDB
import GRDBSQLite

/// One of GRDB's cached statements, bound and read through the SQLite C API.
///
/// The batch runs about ten statements per message. GRDB's `StatementArguments` and `Row` box every value
/// (an array of `DatabaseValue`s in, a `Row` object and a cursor out); in the end-to-end profile that wrapping
/// cost about as much as SQLite's own work for the batch's statements. The statements stay GRDB's (prepared once,
/// cached and finalised by the connection, inside GRDB's transaction); only binding, stepping and reading are
/// direct. Use through `Database.withDirectStatement(sql:_:)`, which resets the statement before and after.
struct DirectStatement: ~Copyable {
    private let statement: Statement
    private let handle: OpaquePointer
    private let connection: OpaquePointer
    private var nextParameter: Int32 = 1
    /// Where texts and blobs are copied to be bound in place (`BindingArena`); nil: SQLite copies them.
    private let arena: BindingArena?

    fileprivate init(_ statement: Statement, connection: OpaquePointer, arena: BindingArena?) {
        // Not `statement.sql` here: GRDB trims the text on every read (it was 40% of a batch's CPU).
        self.statement = statement
        self.handle = statement.sqliteStatement
        self.connection = connection
        self.arena = arena
    }

    // MARK: - Binding, in parameter order

    mutating func bind(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            if let copy = arena?.copy(UnsafeRawBufferPointer(utf8)) {
                _ = sqlite3_bind_text(handle, nextParameter, copy, Int32(utf8.count), sqliteStatic)
            } else {
                // An empty buffer may have no address, and a NULL pointer would bind SQL NULL.
                let bytes = utf8.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(Self.emptyText)
                _ = sqlite3_bind_text(handle, nextParameter, bytes, Int32(utf8.count), sqliteTransient)
            }
        }
        nextParameter += 1
    }

    mutating func bind(_ value: String?) {
        guard let value else { return bindNull() }
        bind(value)
    }

    mutating func bind(_ value: Int?) {
        guard let value else { return bindNull() }
        _ = sqlite3_bind_int64(handle, nextParameter, Int64(value))
        nextParameter += 1
    }

    mutating func bind(_ value: Bool) {
        bind(value ? 1 : 0)
    }

    mutating func bind(_ value: Double?) {
        // SQLite stores NaN as NULL whatever the binding: say so explicitly.
        guard let value, !value.isNaN else { return bindNull() }
        _ = sqlite3_bind_double(handle, nextParameter, value)
        nextParameter += 1
    }

    /// The bytes are copied (into the arena, or by SQLite): the buffer need not outlive the call.
    mutating func bind(bytes buffer: UnsafeRawBufferPointer) {
        if let copy = arena?.copy(buffer) {
            _ = sqlite3_bind_blob(handle, nextParameter, copy, Int32(buffer.count), sqliteStatic)
        } else {
            let address = buffer.baseAddress ?? UnsafeRawPointer(Self.emptyText)
            _ = sqlite3_bind_blob(handle, nextParameter, address, Int32(buffer.count), sqliteTransient)
        }
        nextParameter += 1
    }

    private mutating func bindNull() {
        _ = sqlite3_bind_null(handle, nextParameter)
        nextParameter += 1
    }

    // MARK: - Stepping

    /// Advances to the next row: true when there is one, false when the statement is done.
    /// - Throws: GRDB's `DatabaseError` with SQLite's extended code and message (the store classifies it).
    func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            throw DatabaseError(
                resultCode: ResultCode(rawValue: sqlite3_extended_errcode(connection)),
                message: String(cString: sqlite3_errmsg(connection)), sql: statement.sql)
        }
    }

    /// Runs a statement that returns no rows.
    func execute() throws {
        _ = try step()
    }

    // MARK: - Columns of the current row (0-based)

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    func text(_ column: Int32) -> String {
        // sqlite3_column_text before sqlite3_column_bytes: the documented order for a stable length.
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalText(_ column: Int32) -> String? {
        isNull(column) ? nil : text(column)
    }

    func int(_ column: Int32) -> Int {
        Int(sqlite3_column_int64(handle, column))
    }

    func optionalInt(_ column: Int32) -> Int? {
        isNull(column) ? nil : int(column)
    }

    func optionalDouble(_ column: Int32) -> Double? {
        isNull(column) ? nil : sqlite3_column_double(handle, column)
    }

    func withBytes<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let address = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? address : nil, count: count))
    }

    fileprivate func reset() {
        // The result code repeats the last step's error, already thrown: nothing more to report here.
        _ = sqlite3_reset(handle)
    }

    /// Unbinds every parameter (bindings outlive a reset): done before arena space bound in place is reused.
    fileprivate func clearBindings() {
        _ = sqlite3_clear_bindings(handle)
    }

    /// A valid address for zero bytes (never written, never freed).
    nonisolated(unsafe) private static let emptyText: UnsafePointer<CChar> = {
        let byte = UnsafeMutablePointer<CChar>.allocate(capacity: 1)
        byte.initialize(to: 0)
        return UnsafePointer(byte)
    }()
}

/// SQLite's `SQLITE_TRANSIENT` (a destructor of -1: copy the bytes now), which Swift cannot import as a macro.
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
/// SQLite's `SQLITE_STATIC` (a destructor of 0: the bytes stay valid and unchanged until unbound).
private let sqliteStatic = unsafeBitCast(OpaquePointer(bitPattern: 0), to: sqlite3_destructor_type.self)

extension Database {
    /// Runs `body` with the connection's cached statement for `sql`, reset before binding and after use. With an
    /// `arena`, texts and blobs are bound in place from it (`BindingArena`) and unbound before its space is reused.
    func withDirectStatement<T>(sql: String, arena: BindingArena? = nil, _ body: (inout DirectStatement) throws -> T)
        throws -> T
    {
        let statement = try cachedStatement(sql: sql)
        guard let connection = sqliteConnection else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the connection is closed", sql: sql)
        }
        var direct = DirectStatement(statement, connection: connection, arena: arena)
        let mark = arena?.mark
        direct.reset()
        defer {
            direct.reset()
            if let arena, let mark {
                direct.clearBindings()
                arena.release(to: mark)
            }
        }
        return try body(&direct)
    }
}

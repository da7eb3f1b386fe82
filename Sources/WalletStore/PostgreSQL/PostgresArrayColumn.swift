import NIOCore
import PostgresNIO
import WalletRouting

/// One column of a batch's rows as a one-dimensional PostgreSQL array parameter, `unnest`ed on the server: encoded
/// straight from the rows, with no array of the column's values made first, and with NULL elements where `element`
/// gives nil (PostgresNIO encodes arrays of non-optional values only).
///
/// Building the batch's parameters through intermediate arrays (`rows.map(\.column)`, a `ByteBuffer` per result
/// body) was about 5% of the worker's samples on PostgreSQL (Benchmarks/README.md, "Issue 38, continued: five round
/// trips").
struct PostgresArrayColumn<Rows: Collection, Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>:
    PostgresNonThrowingEncodable
{
    private let rows: Rows
    private let element: (Rows.Element) -> Element?

    init(_ rows: Rows, _ element: @escaping (Rows.Element) -> Element?) {
        self.rows = rows
        self.element = element
    }

    static var psqlType: PostgresDataType { Element.psqlArrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        // The binary array format (array_recv): dimensions, has-nulls flag, element type, then per dimension its
        // length and lower bound, then each element as a length (-1 for NULL) and its bytes.
        buffer.writeInteger(rows.isEmpty ? 0 : 1, as: Int32.self)
        let hasNullsIndex = buffer.writerIndex
        buffer.writeInteger(0, as: Int32.self)
        buffer.writeInteger(Element.psqlType.rawValue)
        guard !rows.isEmpty else { return }
        buffer.writeInteger(Int32(rows.count), as: Int32.self)
        buffer.writeInteger(1, as: Int32.self)
        var hasNulls = false
        for row in rows {
            guard let value = element(row) else {
                hasNulls = true
                buffer.writeInteger(-1, as: Int32.self)
                continue
            }
            let lengthIndex = buffer.writerIndex
            buffer.writeInteger(0, as: Int32.self)
            let start = buffer.writerIndex
            value.encode(into: &buffer, context: context)
            buffer.setInteger(Int32(buffer.writerIndex - start), at: lengthIndex, as: Int32.self)
        }
        if hasNulls {
            buffer.setInteger(1, at: hasNullsIndex, as: Int32.self)
        }
    }
}

extension PostgresArrayColumn where Rows == [Element?] {
    /// The elements themselves, NULL where nil.
    init(_ elements: [Element?]) {
        self.init(elements) { $0 }
    }
}

/// Bytes as a `bytea` element, written from the array that holds them (no `ByteBuffer` copy of each first).
struct PostgresBytes: PostgresArrayEncodable, PostgresNonThrowingEncodable {
    let bytes: [UInt8]

    static var psqlType: PostgresDataType { .bytea }
    static var psqlArrayType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        buffer.writeBytes(bytes)
    }
}

/// A message's recorded results as a `bytea` element, written by the batch's `writer` straight into the parameter.
struct RecordedResultsValue: PostgresArrayEncodable, PostgresNonThrowingEncodable {
    let results: [OutboundResult]
    let writer: RecordedResultsWriter

    static var psqlType: PostgresDataType { .bytea }
    static var psqlArrayType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        _ = writer.withValue(of: results) { buffer.writeBytes($0) }
    }
}

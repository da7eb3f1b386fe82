import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array parameter whose elements may be NULL (PostgresNIO encodes arrays of
/// non-optional values only). The store passes a batch's rows as one array per column, `unnest`ed on the server.
struct PostgresNullableArray<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>:
    PostgresNonThrowingEncodable
{
    var elements: [Element?]

    init(_ elements: [Element?]) {
        self.elements = elements
    }

    static var psqlType: PostgresDataType { Element.psqlArrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        // The binary array format (array_recv): dimensions, has-nulls flag, element type, then per dimension its
        // length and lower bound, then each element as a length (-1 for NULL) and its bytes.
        buffer.writeInteger(elements.isEmpty ? 0 : 1, as: Int32.self)
        buffer.writeInteger(elements.contains { $0 == nil } ? 1 : 0, as: Int32.self)
        buffer.writeInteger(Element.psqlType.rawValue)
        guard !elements.isEmpty else { return }
        buffer.writeInteger(Int32(elements.count), as: Int32.self)
        buffer.writeInteger(1, as: Int32.self)
        for element in elements {
            guard let element else {
                buffer.writeInteger(-1, as: Int32.self)
                continue
            }
            let lengthIndex = buffer.writerIndex
            buffer.writeInteger(0, as: Int32.self)
            let start = buffer.writerIndex
            element.encode(into: &buffer, context: context)
            buffer.setInteger(Int32(buffer.writerIndex - start), at: lengthIndex, as: Int32.self)
        }
    }
}

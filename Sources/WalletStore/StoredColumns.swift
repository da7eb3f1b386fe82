import Foundation

/// Column values the SQLite and PostgreSQL stores write and read the same way; `store` names the store in errors
/// ("SQLite store", "PostgreSQL store").
struct StoredColumns {
    let store: String

    /// A text column holding a raw value this build does not know: the row was written by something else.
    func decode<Value: RawRepresentable<String>>(_ type: Value.Type, _ text: String, column: String)
        throws(StoreError) -> Value
    {
        guard let value = Value(rawValue: text) else {
            throw StoreError(.permanent, "\(store) holds an unknown \(column) value `\(text)`")
        }
        return value
    }

    /// An installation's tags as a JSON array of strings, in order.
    static func encodeTags(_ tags: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(tags), as: UTF8.self)
    }

    func decodeTags(_ text: String) throws(StoreError) -> [String] {
        do {
            return try JSONDecoder().decode([String].self, from: Data(text.utf8))
        } catch {
            throw StoreError(.permanent, "\(store) holds installation tags that are not a JSON array of strings")
        }
    }
}

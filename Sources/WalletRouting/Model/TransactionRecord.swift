/// A transaction record as received and stored (CONTRACT.md §4).
///
/// Immutable, with its fields in one shared object. A record is copied far more often than it is made: a card's
/// history is fetched, merged with the batch's records, cut to its window and echoed in every TNS result. A copy
/// is then one reference count instead of one per text field (up to twelve), which a profile of the worker on
/// PostgreSQL showed at 3.6% of its CPU (Benchmarks/JOURNAL.md, "Records held by reference").
public struct TransactionRecord: Sendable, Hashable, CustomStringConvertible {
    private let storage: Storage

    public var id: String { storage.fields.id }
    /// The `date` exactly as received (ISO 8601 with zone).
    public var date: String { storage.fields.date }
    /// `date` as seconds since the Unix epoch, for ordering.
    public var instant: Double { storage.fields.instant }
    public var status: String { storage.fields.status }
    public var type: String { storage.fields.type }
    public var currencyCode: String { storage.fields.currencyCode }
    /// `amount` exactly as received.
    public var amount: JSONNumber { storage.fields.amount }
    public var displayAmount: String? { storage.fields.displayAmount }
    public var merchantName: String? { storage.fields.merchantName }
    public var merchantType: String? { storage.fields.merchantType }
    public var merchantPostalCode: String? { storage.fields.merchantPostalCode }
    public var terminalID: String? { storage.fields.terminalID }
    public var merchantID: String? { storage.fields.merchantID }
    public var isAuxiliaryTransaction: Bool { storage.fields.isAuxiliaryTransaction }

    public init(
        id: String, date: String, instant: Double, status: String, type: String, currencyCode: String,
        amount: JSONNumber, displayAmount: String? = nil, merchantName: String? = nil, merchantType: String? = nil,
        merchantPostalCode: String? = nil, terminalID: String? = nil, merchantID: String? = nil,
        isAuxiliaryTransaction: Bool = false
    ) {
        storage = Storage(
            Fields(
                id: id, date: date, instant: instant, status: status, type: type, currencyCode: currencyCode,
                amount: amount, displayAmount: displayAmount, merchantName: merchantName, merchantType: merchantType,
                merchantPostalCode: merchantPostalCode, terminalID: terminalID, merchantID: merchantID,
                isAuxiliaryTransaction: isAuxiliaryTransaction))
    }

    /// Equal when every field is: two records made apart from the same values are equal.
    public static func == (lhs: TransactionRecord, rhs: TransactionRecord) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.fields)
    }

    /// The fields, as a struct's default description would show them (test failures print it).
    public var description: String {
        "TransactionRecord" + String(describing: storage.fields).dropFirst("Fields".count)
    }

    private struct Fields: Sendable, Hashable {
        let id: String
        let date: String
        let instant: Double
        let status: String
        let type: String
        let currencyCode: String
        let amount: JSONNumber
        let displayAmount: String?
        let merchantName: String?
        let merchantType: String?
        let merchantPostalCode: String?
        let terminalID: String?
        let merchantID: String?
        let isAuxiliaryTransaction: Bool
    }

    private final class Storage: Sendable {
        let fields: Fields

        init(_ fields: Fields) {
            self.fields = fields
        }
    }
}

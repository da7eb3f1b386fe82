/// The embedded `transaction` of a TNS notification (CONTRACT.md §4), validated field by field.
///
/// Required: `id` (non-empty string, the dedup key), `date` (see `ISO8601Instant`), `status`, `type`,
/// `currencyCode` (`[A-Z]{3}`), `amount` (a number, kept as written). Optional strings are strings when present;
/// `isAuxiliaryTransaction` is a boolean, default false; `null` means absent. Unknown keys are dropped.
/// Enumerated values are matched exactly, as the vendor's record spells them.
extension TransactionRecord {
    static let statuses: Set<String> = ["approved", "declined", "cleared", "refunded"]
    static let types: Set<String> = ["purchase", "refund", "atmWithdrawal", "atmOtherService", "other"]

    init(validating value: JSONValue) throws(Rejection) {
        guard case .object(let record) = value else {
            throw Rejection("transaction must be a JSON object")
        }
        guard case .string(let id)? = record["id"], !id.isEmpty else {
            throw Rejection("transaction.id is required: a non-empty string")
        }
        guard case .string(let date)? = record["date"], let instant = ISO8601Instant.epochSeconds(date) else {
            throw Rejection("transaction.date is required: YYYY-MM-DDThh:mm:ss[.fraction] followed by Z or ±hh:mm")
        }
        guard case .string(let status)? = record["status"], Self.statuses.contains(status) else {
            throw Rejection("transaction.status is required: one of approved, declined, cleared, refunded")
        }
        guard case .string(let type)? = record["type"], Self.types.contains(type) else {
            throw Rejection(
                "transaction.type is required: one of purchase, refund, atmWithdrawal, atmOtherService, other")
        }
        guard case .string(let currencyCode)? = record["currencyCode"], Self.isCurrencyCode(currencyCode) else {
            throw Rejection("transaction.currencyCode is required: three upper-case letters (ISO 4217 alpha-3)")
        }
        guard case .number(let amount)? = record["amount"] else {
            throw Rejection("transaction.amount is required: a number")
        }
        self.init(
            id: id, date: date, instant: instant, status: status, type: type, currencyCode: currencyCode,
            amount: amount,
            displayAmount: try Self.optionalString("displayAmount", in: record),
            merchantName: try Self.optionalString("merchantName", in: record),
            merchantType: try Self.optionalString("merchantType", in: record),
            merchantPostalCode: try Self.optionalString("merchantPostalCode", in: record),
            terminalID: try Self.optionalString("terminalID", in: record),
            merchantID: try Self.optionalString("merchantID", in: record),
            isAuxiliaryTransaction: try Self.isAuxiliary(in: record)
        )
    }

    private static func isCurrencyCode(_ text: String) -> Bool {
        text.utf8.count == 3 && text.utf8.allSatisfy { $0 &- UInt8(ascii: "A") < 26 }
    }

    private static func optionalString(_ key: String, in record: JSONObject) throws(Rejection) -> String? {
        switch record[key] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw Rejection("transaction.\(key) must be a string when present")
        }
    }

    private static func isAuxiliary(in record: JSONObject) throws(Rejection) -> Bool {
        switch record["isAuxiliaryTransaction"] {
        case nil, .null?: return false
        case .bool(let value)?: return value
        default: throw Rejection("transaction.isAuxiliaryTransaction must be a boolean when present")
        }
    }

    /// The record as stored: received fields, absent optional strings omitted, `isAuxiliaryTransaction` always.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("id")
        writer.string(id)
        writer.key("date")
        writer.string(date)
        writer.key("status")
        writer.string(status)
        writer.key("type")
        writer.string(type)
        writer.key("currencyCode")
        writer.string(currencyCode)
        writer.key("amount")
        writer.number(amount)
        if let displayAmount {
            writer.key("displayAmount")
            writer.string(displayAmount)
        }
        if let merchantName {
            writer.key("merchantName")
            writer.string(merchantName)
        }
        if let merchantType {
            writer.key("merchantType")
            writer.string(merchantType)
        }
        if let merchantPostalCode {
            writer.key("merchantPostalCode")
            writer.string(merchantPostalCode)
        }
        if let terminalID {
            writer.key("terminalID")
            writer.string(terminalID)
        }
        if let merchantID {
            writer.key("merchantID")
            writer.string(merchantID)
        }
        writer.key("isAuxiliaryTransaction")
        writer.bool(isAuxiliaryTransaction)
        writer.endObject()
    }
}

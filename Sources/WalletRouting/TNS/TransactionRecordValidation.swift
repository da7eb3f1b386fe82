/// The embedded `transaction` of a TNS notification (CONTRACT.md §4), validated field by field.
///
/// Required: `id` (non-empty string, the dedup key), `date` (see `ISO8601Instant`), `status`, `type`,
/// `currencyCode` (`[A-Z]{3}`), `amount` (a number, kept as written). Optional strings are strings when present;
/// `isAuxiliaryTransaction` is a boolean, default false; `null` means absent. Unknown keys are dropped.
/// Enumerated values are matched exactly, as the vendor's record spells them.
extension TransactionRecord {
    init(validating value: JSONValue) throws(Rejection) {
        guard case .object(let object) = value else {
            throw Rejection("transaction must be a JSON object")
        }
        let record = RecordMembers(object)
        guard case .string(let id)? = record.id, !id.isEmpty else {
            throw Rejection("transaction.id is required: a non-empty string")
        }
        guard case .string(let date)? = record.date, let instant = ISO8601Instant.epochSeconds(date) else {
            throw Rejection("transaction.date is required: YYYY-MM-DDThh:mm:ss[.fraction] followed by Z or ±hh:mm")
        }
        guard case .string(let status)? = record.status, Self.isStatus(status) else {
            throw Rejection("transaction.status is required: one of approved, declined, cleared, refunded")
        }
        guard case .string(let type)? = record.type, Self.isType(type) else {
            throw Rejection(
                "transaction.type is required: one of purchase, refund, atmWithdrawal, atmOtherService, other")
        }
        guard case .string(let currencyCode)? = record.currencyCode, Self.isCurrencyCode(currencyCode) else {
            throw Rejection("transaction.currencyCode is required: three upper-case letters (ISO 4217 alpha-3)")
        }
        guard case .number(let amount)? = record.amount else {
            throw Rejection("transaction.amount is required: a number")
        }
        self.init(
            id: id, date: date, instant: instant, status: status, type: type, currencyCode: currencyCode,
            amount: amount,
            displayAmount: try Self.optionalString("displayAmount", record.displayAmount),
            merchantName: try Self.optionalString("merchantName", record.merchantName),
            merchantType: try Self.optionalString("merchantType", record.merchantType),
            merchantPostalCode: try Self.optionalString("merchantPostalCode", record.merchantPostalCode),
            terminalID: try Self.optionalString("terminalID", record.terminalID),
            merchantID: try Self.optionalString("merchantID", record.merchantID),
            isAuxiliaryTransaction: try Self.isAuxiliary(record.isAuxiliaryTransaction)
        )
    }

    /// Enumerated values are matched exactly, as the vendor spells them.
    private static func isStatus(_ text: String) -> Bool {
        switch text {
        case "approved", "declined", "cleared", "refunded": true
        default: false
        }
    }

    private static func isType(_ text: String) -> Bool {
        switch text {
        case "purchase", "refund", "atmWithdrawal", "atmOtherService", "other": true
        default: false
        }
    }

    private static func isCurrencyCode(_ text: String) -> Bool {
        text.utf8.count == 3 && text.utf8.allSatisfy { $0 &- UInt8(ascii: "A") < 26 }
    }

    private static func optionalString(_ key: StaticString, _ value: JSONValue?) throws(Rejection) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw Rejection("transaction.\(key) must be a string when present")
        }
    }

    private static func isAuxiliary(_ value: JSONValue?) throws(Rejection) -> Bool {
        switch value {
        case nil, .null?: return false
        case .bool(let value)?: return value
        default: throw Rejection("transaction.isAuxiliaryTransaction must be a boolean when present")
        }
    }

    /// The record as stored: received fields, absent optional strings omitted, `isAuxiliaryTransaction` always
    /// (the TNS result's form, and `wallet-worker inspect card`'s).
    /// Written into space reserved once per record (a result echoes up to ten of them); a record with a string
    /// that needs escaping beyond that space is written again through the checked API.
    public func write(to writer: inout JSONWriter) {
        // 190 bytes of keys and punctuation, then the values as they are.
        var maximum = 200 + amount.literal.utf8.count
        maximum += id.utf8.count + date.utf8.count + status.utf8.count + type.utf8.count + currencyCode.utf8.count
        maximum += (displayAmount?.utf8.count ?? 0) + (merchantName?.utf8.count ?? 0)
        maximum += (merchantType?.utf8.count ?? 0) + (merchantPostalCode?.utf8.count ?? 0)
        maximum += (terminalID?.utf8.count ?? 0) + (merchantID?.utf8.count ?? 0)
        maximum += 2 * 11  // quotes
        let written = writer.withReservedOutput(maximum: maximum) { out in
            out.fragment(#"{"id":"#)
            out.string(id)
            out.fragment(#","date":"#)
            out.string(date)
            out.fragment(#","status":"#)
            out.string(status)
            out.fragment(#","type":"#)
            out.string(type)
            out.fragment(#","currencyCode":"#)
            out.string(currencyCode)
            out.fragment(#","amount":"#)
            out.number(amount)
            if let displayAmount {
                out.fragment(#","displayAmount":"#)
                out.string(displayAmount)
            }
            if let merchantName {
                out.fragment(#","merchantName":"#)
                out.string(merchantName)
            }
            if let merchantType {
                out.fragment(#","merchantType":"#)
                out.string(merchantType)
            }
            if let merchantPostalCode {
                out.fragment(#","merchantPostalCode":"#)
                out.string(merchantPostalCode)
            }
            if let terminalID {
                out.fragment(#","terminalID":"#)
                out.string(terminalID)
            }
            if let merchantID {
                out.fragment(#","merchantID":"#)
                out.string(merchantID)
            }
            out.fragment(#","isAuxiliaryTransaction":"#)
            out.bool(isAuxiliaryTransaction)
            out.fragment("}")
        }
        if !written { writeChecked(to: &writer) }
    }

    /// The same record through the checked writer API, for records whose strings need escaping.
    private func writeChecked(to writer: inout JSONWriter) {
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

/// The known members of an embedded record, found in one pass (the first of each, as `JSONObject`'s subscript
/// finds it) instead of one scan of the members per field.
private struct RecordMembers {
    var id: JSONValue?
    var date: JSONValue?
    var status: JSONValue?
    var type: JSONValue?
    var currencyCode: JSONValue?
    var amount: JSONValue?
    var displayAmount: JSONValue?
    var merchantName: JSONValue?
    var merchantType: JSONValue?
    var merchantPostalCode: JSONValue?
    var terminalID: JSONValue?
    var merchantID: JSONValue?
    var isAuxiliaryTransaction: JSONValue?

    init(_ record: JSONObject) {
        for member in record.members {
            let key = member.key
            // The length first: most keys are then told apart by one comparison.
            switch key.utf8.count {
            case 2:
                if id == nil, key == "id" { id = member.value }
            case 4:
                if key == "date" {
                    if date == nil { date = member.value }
                } else if type == nil, key == "type" {
                    type = member.value
                }
            case 6:
                if key == "amount" {
                    if amount == nil { amount = member.value }
                } else if status == nil, key == "status" {
                    status = member.value
                }
            case 10:
                if key == "merchantID" {
                    if merchantID == nil { merchantID = member.value }
                } else if terminalID == nil, key == "terminalID" {
                    terminalID = member.value
                }
            case 12:
                if key == "currencyCode" {
                    if currencyCode == nil { currencyCode = member.value }
                } else if key == "merchantName" {
                    if merchantName == nil { merchantName = member.value }
                } else if merchantType == nil, key == "merchantType" {
                    merchantType = member.value
                }
            case 13:
                if displayAmount == nil, key == "displayAmount" { displayAmount = member.value }
            case 18:
                if merchantPostalCode == nil, key == "merchantPostalCode" { merchantPostalCode = member.value }
            case 22:
                if isAuxiliaryTransaction == nil, key == "isAuxiliaryTransaction" {
                    isAuxiliaryTransaction = member.value
                }
            default:
                continue
            }
        }
    }
}

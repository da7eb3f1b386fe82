import Foundation

/// TNS notifications: transaction records (CONTRACT.md §4). All the TNS rules live here.
///
/// 1. Bad input, checked in this order (§8): `action` must be `TNS:PaymentTransactionNotification`;
///    `digitalCardId` must be present; `transactionRecordType` absent, `primary` or `auxiliary`
///    (case-insensitive); the embedded `transaction`, when present, must be a valid record. All of it is
///    checked before the card is looked up.
/// 2. The card must exist and not be deleted, else an `unknownDigitalCardID` error result and nothing stored.
/// 3. The embedded record is stored unless the card already has a record with its id (the first is kept).
/// 4. The result shows the history view: records of the requested type (`primary`: not auxiliary,
///    `auxiliary`: auxiliary, absent: all), newest first by `date` (ties: the later stored first), no older
///    than the window (30 days) before the newest kept record, inclusive, at most the limit (10).
extension NotificationRouter {
    func routeTransactionNotification(
        _ payload: JSONObject, fields: NotificationFields, state: some WalletStateReading,
        envelope: inout ResultEnvelope
    ) throws -> Handled {
        guard fields.carriesRequiredAction(of: .tns) else {
            throw Rejection("action must be TNS:PaymentTransactionNotification for sender TNS")
        }
        guard let digitalCardId = fields.digitalCardIdString else {
            throw Rejection("digitalCardId is missing: a non-empty string is required for sender TNS")
        }
        let recordType = try TransactionRecordType(fields.transactionRecordType)
        let newRecord: TransactionRecord? =
            switch payload["transaction"] {
            case nil, .null?: nil
            case let value?: try TransactionRecord(validating: value)
            }

        let exchange = settings.exchanges.transactions
        guard let card = try state.card(digitalCardId), card.state != .deleted else {
            envelope.publish(.transactionRecords, exchange: exchange, routingKey: "transactions.error") {
                $0.key("digitalCardId")
                $0.string(digitalCardId)
                $0.key("transactionRecordType")
                $0.string(recordType?.rawValue)
                $0.key("error")
                $0.beginObject()
                $0.key("kind")
                $0.string("unknownDigitalCardID")
                $0.key("message")
                $0.string("the digital card is unknown or deleted: no transaction record stored")
                $0.endObject()
            }
            return Handled(effects: [], outcome: .domainError)
        }

        var stored: TransactionRecord?
        if let newRecord, try !state.hasTransaction(digitalCardId: card.digitalCardId, recordId: newRecord.id) {
            stored = newRecord
        }
        let auxiliary = recordType?.isAuxiliary
        // Passed straight in, so the view inserts the new record into this array without copying it.
        let view = TransactionHistory.view(
            newestStored: try state.newestTransactions(
                digitalCardId: digitalCardId, auxiliary: auxiliary, limit: settings.transactionHistoryLimit
            ),
            adding: stored.flatMap { auxiliary == nil || $0.isAuxiliaryTransaction == auxiliary ? $0 : nil },
            limit: settings.transactionHistoryLimit,
            windowSeconds: settings.transactionHistoryWindowSeconds
        )

        // A record echoes in about 250 bytes.
        envelope.publish(
            .transactionRecords, exchange: exchange, routingKey: "transactions.records",
            fieldBytes: 128 + view.count * 256
        ) {
            $0.key("digitalCardId")
            $0.string(digitalCardId)
            $0.key("transactionRecordType")
            $0.string(recordType?.rawValue)
            $0.key("records")
            $0.beginArray()
            // By index: a for-in loop would copy every record (a retain and a release per string field).
            for index in view.indices { view[index].write(to: &$0) }
            $0.endArray()
        }
        let effects: [Effect] = stored.map { [.storeTransaction(digitalCardId: digitalCardId, record: $0)] } ?? []
        return Handled(effects: effects, outcome: .processed)
    }
}

/// `transactionRecordType`, present only for co-badged cards; echoed lower-case.
enum TransactionRecordType: String {
    case primary
    case auxiliary

    /// nil when absent or null; any other value, the empty string included, is bad input.
    init?(_ value: JSONValue?) throws(Rejection) {
        switch value {
        case nil, .null?:
            return nil
        case .string(let text)? where ASCIICase.equals(text, "primary"):
            self = .primary
        case .string(let text)? where ASCIICase.equals(text, "auxiliary"):
            self = .auxiliary
        default:
            throw Rejection("transactionRecordType must be primary or auxiliary when present")
        }
    }

    var isAuxiliary: Bool { self == .auxiliary }
}

/// The records view of a TNS result.
enum TransactionHistory {
    /// - Parameters:
    ///   - newestStored: the stored records of the requested type, newest first (ties: later stored first),
    ///     at least `limit` of them when the card has that many.
    ///   - adding: a record of the requested type being stored now (the latest stored, so first among ties).
    static func view(
        newestStored: consuming [TransactionRecord], adding new: TransactionRecord?, limit: Int,
        windowSeconds: Double
    ) -> ArraySlice<TransactionRecord> {
        var records = newestStored
        if let new {
            let position = records.firstIndex { $0.instant <= new.instant } ?? records.endIndex
            records.insert(new, at: position)
        }
        guard limit > 0, let newest = records.first else { return [] }
        // Both cuts keep a prefix of the ordered records, so their order does not matter.
        let oldestKept = newest.instant - windowSeconds
        let end = records.prefix(limit).firstIndex { $0.instant < oldestKept } ?? min(limit, records.count)
        return records[..<end]
    }
}

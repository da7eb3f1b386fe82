import WalletRouting

/// A transaction record as `SQLiteStateCache` keeps it: its text fields in one byte buffer.
///
/// A `TransactionRecord` is one shared object of about 220 bytes plus a heap string for each field longer than 15
/// bytes (the date always), about 340 bytes in all. Packed, a record is 24 bytes in the array and one allocation of
/// about 130. Unpacking the records of a view costs far less than reading them back from the file
/// (Benchmarks/JOURNAL.md, "the SQLite worker's peak memory").
struct PackedTransactionRecord: Sendable {
    let instant: Double
    let isAuxiliaryTransaction: Bool
    /// Each text field in `TransactionRecord`'s order: its UTF-8 length plus one as a LEB128 varint (0: nil), then
    /// its bytes.
    private let fields: [UInt8]

    init(_ record: TransactionRecord) {
        instant = record.instant
        isAuxiliaryTransaction = record.isAuxiliaryTransaction
        let texts: [String?] = [
            record.id, record.date, record.status, record.type, record.currencyCode, record.amount.literal,
            record.displayAmount, record.merchantName, record.merchantType, record.merchantPostalCode,
            record.terminalID, record.merchantID,
        ]
        var fields: [UInt8] = []
        fields.reserveCapacity(texts.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 2 })
        for text in texts {
            guard var text else {
                fields.append(0)
                continue
            }
            var length = UInt(text.utf8.count) + 1
            while length >= 0x80 {
                fields.append(UInt8(truncatingIfNeeded: length) | 0x80)
                length >>= 7
            }
            fields.append(UInt8(length))
            text.withUTF8 { fields.append(contentsOf: $0) }
        }
        self.fields = fields
    }

    /// The record, as it was packed.
    var record: TransactionRecord {
        fields.withUnsafeBufferPointer { bytes in
            var offset = 0
            func next() -> String? {
                var length: UInt = 0
                var shift: UInt = 0
                while true {
                    let byte = bytes[offset]
                    offset += 1
                    length |= UInt(byte & 0x7F) << shift
                    if byte < 0x80 { break }
                    shift += 7
                }
                guard length > 0 else { return nil }
                let end = offset + Int(length - 1)
                defer { offset = end }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[offset..<end]), as: UTF8.self)
            }
            // Fields the record always has are never packed as nil.
            return TransactionRecord(
                id: next()!, date: next()!, instant: instant, status: next()!, type: next()!,
                currencyCode: next()!, amount: JSONNumber(validatedLiteral: next()!), displayAmount: next(),
                merchantName: next(), merchantType: next(), merchantPostalCode: next(), terminalID: next(),
                merchantID: next(), isAuxiliaryTransaction: isAuxiliaryTransaction)
        }
    }
}

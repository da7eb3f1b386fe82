/// The state a batch's routing will read, foreseen from its messages alone (`NotificationRouter.foreseeReads`): what
/// a store that reads over the network fetches in one round trip before it routes the batch (the PostgreSQL store).
///
/// A superset, whatever the state holds: a TNS names its card's history even when the card turns out to be unknown
/// and the history is never read. A hint, not a promise: a store still treats a read it did not fetch as a miss
/// (the PostgreSQL store fetches it and routes the batch again). `ReadForesightTests` checks over the golden corpus
/// that routing reads nothing unforeseen.
public struct ForeseenReads: Sendable, Equatable {
    /// A transaction record asked about by id (`WalletStateReading.hasTransaction`).
    public struct Record: Hashable, Sendable {
        public var digitalCardId: String
        public var recordId: String

        public init(digitalCardId: String, recordId: String) {
            self.digitalCardId = digitalCardId
            self.recordId = recordId
        }
    }

    /// A card's newest records, all of them or of one kind (`WalletStateReading.newestTransactions`).
    public struct History: Hashable, Sendable {
        public var digitalCardId: String
        public var auxiliary: Bool?

        public init(digitalCardId: String, auxiliary: Bool?) {
            self.digitalCardId = digitalCardId
            self.auxiliary = auxiliary
        }
    }

    public var cards: Set<String> = []
    public var records: Set<Record> = []
    /// The most records asked for, per history.
    public var histories: [History: Int] = [:]

    public init() {}
}

extension NotificationRouter {
    /// Adds the reads routing `message` can make to `reads`. Mirrors `route(_:state:now:)`: nothing for a message
    /// it rejects before reading the state (too large, not a JSON object) or that reads none (installations,
    /// action notifications); the card for CPS and MG; for TNS the card, the embedded record's id and the history.
    public func foreseeReads(of message: InboundMessage, into reads: inout ForeseenReads) {
        guard message.bodyByteCount <= UInt64(settings.maximumBodyBytes),
            message.properties.type != Self.deviceInstallationType,
            message.properties.type != Self.deviceInstallationDeletedType,
            case .object(let payload)? = try? JSONParser.parse(message.body)
        else { return }
        let fields = NotificationFields(payload)
        guard let sender = fields.senderString.flatMap(SDKSender.init), let digitalCardId = fields.digitalCardIdString
        else { return }
        reads.cards.insert(digitalCardId)
        guard sender == .tns else { return }
        if let transaction = payload["transaction"], let recordId = TransactionRecord.foreseenID(in: transaction) {
            reads.records.insert(ForeseenReads.Record(digitalCardId: digitalCardId, recordId: recordId))
        }
        // A record type the route refuses stops it before any read.
        let recordType: TransactionRecordType?
        do {
            recordType = try TransactionRecordType(fields.transactionRecordType)
        } catch {
            return
        }
        guard settings.transactionHistoryLimit > 0 else { return }
        let history = ForeseenReads.History(digitalCardId: digitalCardId, auxiliary: recordType?.isAuxiliary)
        reads.histories[history] = max(reads.histories[history] ?? 0, settings.transactionHistoryLimit)
    }
}

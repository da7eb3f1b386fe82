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
    /// Adds the reads routing `message` can make to `reads`. Mirrors `route(_:state:now:)` up to its first read:
    /// nothing for a message it rejects before reading the state (its envelope or size, not a JSON object, a
    /// missing or wrong `action`, an invalid embedded record) or that reads none (installations, action
    /// notifications, a CPS payload with no server message); then the card for CPS and MG, and for TNS the card,
    /// the embedded record's id and the history.
    /// - Returns: the body, when it was parsed to foresee: routing takes it (`route(_:body:state:now:)`) instead of
    ///   parsing it again.
    @discardableResult
    public func foreseeReads(of message: InboundMessage, into reads: inout ForeseenReads) -> ParsedBody? {
        guard rejectionBeforeTheBody(message) == nil,
            message.properties.type != Self.deviceInstallationType,
            message.properties.type != Self.deviceInstallationDeletedType
        else { return nil }
        let body = ParsedBody(message.body)
        if case .success(.object(let payload)) = body.value {
            foreseeReads(of: payload, into: &reads)
        }
        return body
    }

    private func foreseeReads(of payload: JSONObject, into reads: inout ForeseenReads) {
        let fields = NotificationFields(payload)
        guard let sender = fields.senderString.flatMap(SDKSender.init), fields.carriesRequiredAction(of: sender),
            let digitalCardId = fields.digitalCardIdString
        else { return }
        switch sender {
        case .cps:
            guard ServerMessage.stack(of: payload) != nil else { return }
            reads.cards.insert(digitalCardId)
        case .mg:
            reads.cards.insert(digitalCardId)
        case .tns:
            // The route refuses a bad record type or record before it reads anything.
            let recordType: TransactionRecordType?
            let record: TransactionRecord?
            do {
                recordType = try TransactionRecordType(fields.transactionRecordType)
                switch payload["transaction"] {
                case nil, .null?: record = nil
                case let value?: record = try TransactionRecord(validating: value)
                }
            } catch {
                return
            }
            reads.cards.insert(digitalCardId)
            if let record {
                reads.records.insert(ForeseenReads.Record(digitalCardId: digitalCardId, recordId: record.id))
            }
            guard settings.transactionHistoryLimit > 0 else { return }
            let history = ForeseenReads.History(digitalCardId: digitalCardId, auxiliary: recordType?.isAuxiliary)
            reads.histories[history] = max(reads.histories[history] ?? 0, settings.transactionHistoryLimit)
        }
    }
}

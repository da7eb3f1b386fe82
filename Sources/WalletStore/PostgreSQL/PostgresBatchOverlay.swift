import Foundation
import WalletRouting

/// One routing pass of a batch over what its transaction fetched (`PostgresBatchSnapshot`), plus the batch's own
/// effects so far: what `BatchRouting` reads and writes, synchronously, with no round trip to the server.
///
/// A read the snapshot cannot answer is recorded in `missing` and answered with a stand-in (an active card, no
/// records, not processed): the pass is then worthless and the store fetches the missing keys and routes again.
/// The active stand-in card leads the router on to the reads a real card would need (its records, its history),
/// so one more fetch finds them all.
final class PostgresBatchOverlay: WalletStoreTransaction {
    private let snapshot: PostgresBatchSnapshot
    private(set) var missing = PostgresBatchKeys()

    // The batch's changes, applied in order; written in bulk at the end.
    private(set) var changedCards: [String: CardRecord] = [:]
    private(set) var storedRecords: [(digitalCardId: String, record: TransactionRecord)] = []
    private var storedByCard: [String: [TransactionRecord]] = [:]
    private var storedIDs: Set<RecordKey> = []
    /// The last word on each installation touched: its row, or nil once deleted.
    private(set) var installations: [String: Installation?] = [:]
    private(set) var recorded: [(messageID: String, decision: Decision)] = []
    private var recordedByID: [String: Decision] = [:]

    init(snapshot: PostgresBatchSnapshot) {
        self.snapshot = snapshot
    }

    // MARK: - WalletStateReading

    func card(_ digitalCardId: String) -> CardRecord? {
        if let changed = changedCards[digitalCardId] { return changed }
        if let fetched = snapshot.cards[digitalCardId] { return fetched }
        missing.cards.insert(digitalCardId)
        return CardRecord(digitalCardId: digitalCardId, state: .active)
    }

    func hasTransaction(digitalCardId: String, recordId: String) -> Bool {
        let key = RecordKey(digitalCardId: digitalCardId, recordId: recordId)
        if storedIDs.contains(key) { return true }
        if let fetched = snapshot.records[key] { return fetched }
        missing.records.insert(key)
        return false
    }

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) -> [TransactionRecord] {
        guard limit > 0 else { return [] }
        let key = HistoryKey(digitalCardId: digitalCardId, auxiliary: auxiliary)
        guard snapshot.covers(key, limit: limit), let fetched = snapshot.histories[key]?.records else {
            missing.askHistory(key, limit: limit)
            return []
        }
        let added = (storedByCard[digitalCardId] ?? []).filter {
            auxiliary == nil || $0.isAuxiliaryTransaction == auxiliary
        }
        guard !added.isEmpty else { return Array(fetched.prefix(limit)) }
        return Self.newestFirst(fetched: fetched, added: added, limit: limit)
    }

    /// Merges the fetched records (newest first) with the batch's (in storage order, all stored after them):
    /// newest `instant` first; among equal instants the later stored first. One pass over both, the batch's few
    /// put in that order first.
    private static func newestFirst(fetched: [TransactionRecord], added: [TransactionRecord], limit: Int)
        -> [TransactionRecord]
    {
        let addedNewestFirst = added.indices.sorted {
            added[$0].instant != added[$1].instant ? added[$0].instant > added[$1].instant : $0 > $1
        }
        var merged: [TransactionRecord] = []
        merged.reserveCapacity(min(limit, fetched.count + added.count))
        var nextFetched = fetched.startIndex
        var nextAdded = addedNewestFirst.startIndex
        while merged.count < limit {
            let takesAdded: Bool
            if nextAdded == addedNewestFirst.endIndex {
                guard nextFetched < fetched.endIndex else { break }
                takesAdded = false
            } else {
                // On an equal instant the batch's record goes first: it was stored after every fetched one.
                takesAdded =
                    nextFetched == fetched.endIndex
                    || added[addedNewestFirst[nextAdded]].instant >= fetched[nextFetched].instant
            }
            if takesAdded {
                merged.append(added[addedNewestFirst[nextAdded]])
                nextAdded += 1
            } else {
                merged.append(fetched[nextFetched])
                nextFetched += 1
            }
        }
        return merged
    }

    // MARK: - WalletStoreTransaction

    func recordedDecision(messageID: String) -> Decision? {
        if let recorded = recordedByID[messageID] { return recorded }
        if let fetched = snapshot.decisions[messageID] { return fetched }
        missing.messageIDs.insert(messageID)
        return nil
    }

    func apply(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .upsertCard(let card):
                changedCards[card.digitalCardId] = card
            case .storeTransaction(let digitalCardId, let record):
                // The first record with an id is kept, as in the other stores.
                let key = RecordKey(digitalCardId: digitalCardId, recordId: record.id)
                guard !storedIDs.contains(key), snapshot.records[key] != true else { continue }
                storedIDs.insert(key)
                storedRecords.append((digitalCardId, record))
                storedByCard[digitalCardId, default: []].append(record)
            case .upsertInstallation(let installation):
                installations[installation.installationId] = .some(installation)
            case .deleteInstallation(let installationId):
                installations[installationId] = .some(nil)
            }
        }
    }

    func record(messageID: String, decision: Decision, at now: Date) {
        let recorded = Decision.recorded(
            results: decision.results, outcome: decision.outcome, sender: decision.sender,
            digitalCardId: decision.digitalCardId)
        recordedByID[messageID] = recorded
        self.recorded.append((messageID, recorded))
    }

    // MARK: - What the pass found

    /// Whether a card was fetched and found: it is row-locked and is updated; any other is inserted.
    func existed(_ digitalCardId: String) -> Bool {
        snapshot.cards[digitalCardId].map { $0 != nil } ?? false
    }
}

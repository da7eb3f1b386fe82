import BrokerTestSupport
import Foundation
import WalletRouting
import WalletStore

/// What the workers must publish and store when every card's messages are applied in publication order: the
/// workload routed in-process, one message after another, through `NotificationRouter` and an
/// `InMemoryWalletStore` (same batch rules as the real stores, replays included).
///
/// In the ordered mode this is exactly what three replicas must produce, up to the processing time (`processedAt`,
/// and the `expiryDate` of replenished keys, computed from it). In the default mode it only sizes the run.
struct ReplicaModel: Sendable {
    struct ExpectedResult: Sendable {
        var id: String
        var exchange: String
        var routingKey: String
        var body: [UInt8]
    }

    /// The results of each message's first processing, by inbound message id, in publication order.
    var resultsByInbound: [String: [ExpectedResult]] = [:]
    /// Result ids in processing order per ordering group: the card header, or "" for messages without one (they
    /// share one shard in the ordered mode).
    var resultOrderByGroup: [String: [String]] = [:]
    /// The inbound ids a store records: everything but rejected (malformed) messages.
    var recordedIDs: Set<String> = []
    var state: InMemoryWalletState
    var distinctResultCount: Int { resultsByInbound.values.reduce(0) { $0 + $1.count } }

    init(_ workload: ReplicaWorkload, exchanges: RoutingSettings.ResultExchanges) async throws {
        var settings = RoutingSettings()
        settings.exchanges = exchanges
        let router = NotificationRouter(settings: settings)
        let store = InMemoryWalletStore()
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        for message in workload.all {
            let stored = try await store.process([message.inbound], router: router, now: now)[0]
            if message.isMalformed {
                guard case .deadLetter = stored.decision.disposition else {
                    throw BrokerTestError(
                        "the workload's malformed message \(message.id) is not rejected by the router")
                }
            } else if case .deadLetter(let reason) = stored.decision.disposition {
                throw BrokerTestError("the workload's message \(message.id) is rejected by the router: \(reason)")
            } else {
                recordedIDs.insert(message.id)
            }
            guard !stored.isReplay else { continue }
            let results = stored.decision.results.map {
                ExpectedResult(
                    id: $0.properties.messageID ?? "", exchange: $0.exchange, routingKey: $0.routingKey,
                    body: $0.body)
            }
            resultsByInbound[message.id] = results
            resultOrderByGroup[message.cardHeader ?? "", default: []] += results.map(\.id)
        }
        state = store.state
    }
}

/// A result body with what depends on the processing time blanked out: the values of `processedAt` and
/// `expiryDate` (now + the key validity). The router writes members in a fixed order, so the rest is compared byte
/// for byte. (Foundation's search: a byte loop here, in a debug build, took half a minute for a run's results.)
func timeIndependentText(_ body: [UInt8]) -> Data {
    var data = Data(body)
    for key in timeDependentKeys {
        var from = data.startIndex
        while let found = data.range(of: key, in: from..<data.endIndex),
            let close = data[found.upperBound...].firstIndex(of: UInt8(ascii: "\""))
        {
            data.removeSubrange(found.upperBound..<close)
            from = found.upperBound
        }
    }
    return data
}

private let timeDependentKeys = [Data(#""processedAt":""#.utf8), Data(#""expiryDate":""#.utf8)]

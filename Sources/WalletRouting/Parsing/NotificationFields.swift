/// The four top-level keys of a push payload that are matched case-insensitively (CONTRACT.md §2):
/// `sender`, `action`, `digitalCardId`, `transactionRecordType`.
///
/// ASCII case folding; when several spellings are present the exact one wins, else the first in the document
/// (`digitalCardID` is common in the vendor's own samples). The spelling rule picks one member; a `null` value
/// then means absent. Every other key of the payload is matched exactly.
struct NotificationFields {
    private(set) var sender: JSONValue?
    private(set) var action: JSONValue?
    private(set) var digitalCardId: JSONValue?
    private(set) var transactionRecordType: JSONValue?

    /// One pass over the members, no dictionary.
    init(_ object: JSONObject) {
        var exact: (sender: Bool, action: Bool, digitalCardId: Bool, transactionRecordType: Bool) =
            (false, false, false, false)
        for member in object.members {
            let key = member.key
            switch key.utf8.count {
            case 6:
                if key == "sender" {
                    if !exact.sender {
                        sender = member.value
                        exact.sender = true
                    }
                } else if key == "action" {
                    if !exact.action {
                        action = member.value
                        exact.action = true
                    }
                } else if sender == nil, ASCIICase.equals(key, "sender") {
                    sender = member.value
                } else if action == nil, ASCIICase.equals(key, "action") {
                    action = member.value
                }
            case 13:
                if key == "digitalCardId" {
                    if !exact.digitalCardId {
                        digitalCardId = member.value
                        exact.digitalCardId = true
                    }
                } else if digitalCardId == nil, ASCIICase.equals(key, "digitalCardId") {
                    digitalCardId = member.value
                }
            case 21:
                if key == "transactionRecordType" {
                    if !exact.transactionRecordType {
                        transactionRecordType = member.value
                        exact.transactionRecordType = true
                    }
                } else if transactionRecordType == nil, ASCIICase.equals(key, "transactionRecordType") {
                    transactionRecordType = member.value
                }
            default:
                continue
            }
        }
    }

    /// The `sender` when it is a string.
    var senderString: String? { sender?.stringValue }

    /// The `sender` upper-cased for results, metrics and logs (CONTRACT.md §9), nil unless it is a string.
    var senderLabel: String? {
        guard let value = senderString else { return nil }
        switch SDKSender(value) {
        case .cps: return "CPS"
        case .tns: return "TNS"
        case .mg: return "MG"
        case nil: return value.uppercased()
        }
    }

    /// The `digitalCardId` when present: a non-empty string.
    var digitalCardIdString: String? {
        guard case .string(let value)? = digitalCardId, !value.isEmpty else { return nil }
        return value
    }

    /// The `action` when it is a string (possibly empty).
    var actionString: String? { action?.stringValue }

    /// Whether the `action` is the one `sender`'s notifications must carry (case-insensitive; CPS requires none).
    func carriesRequiredAction(of sender: SDKSender) -> Bool {
        guard let required = sender.requiredAction else { return true }
        guard let action = actionString else { return false }
        return ASCIICase.equals(action, required)
    }
}

/// The SDK senders the worker routes (CONTRACT.md §2); anything else is a non-SDK notification (§6).
enum SDKSender {
    case cps
    case tns
    case mg

    init?(_ value: String) {
        if ASCIICase.equals(value, "CPS") {
            self = .cps
        } else if ASCIICase.equals(value, "TNS") {
            self = .tns
        } else if ASCIICase.equals(value, "MG") {
            self = .mg
        } else {
            return nil
        }
    }

    /// The `action` this sender's notifications must carry (CONTRACT.md §4, §5).
    var requiredAction: StaticString? {
        switch self {
        case .cps: nil
        case .tns: "TNS:PaymentTransactionNotification"
        case .mg: "MG:ReplenishmentNeededNotification"
        }
    }
}

/// The vendor's known CPS messages (`KnownMessage`), selected by the server message `code`, matched exactly.
enum KnownMessage: String {
    case requestInstallCard
    case requestSuspendCard
    case requestResumeCard
    case requestDeleteCard
    case requestReplenishKeys
    case requestRenewCard
    case requestRenewODACert

    /// nil for any other code: an informational message (no state change, the card need not exist).
    init?(code: String) {
        switch code {
        case "CBP.info.tokenProvisioned": self = .requestInstallCard
        case "CBP.info.tokenSuspended": self = .requestSuspendCard
        case "CBP.info.tokenResumed": self = .requestResumeCard
        case "CBP.info.tokenDeleted": self = .requestDeleteCard
        case "CBP.info.tokenReplenished": self = .requestReplenishKeys
        case "CBP.info.tokenRenewed": self = .requestRenewCard
        case "CBP.info.tokenODACertRenewed": self = .requestRenewODACert
        default: return nil
        }
    }

    /// `card.serverMessage.<knownMessage>`.
    var routingKey: String {
        switch self {
        case .requestInstallCard: "card.serverMessage.requestInstallCard"
        case .requestSuspendCard: "card.serverMessage.requestSuspendCard"
        case .requestResumeCard: "card.serverMessage.requestResumeCard"
        case .requestDeleteCard: "card.serverMessage.requestDeleteCard"
        case .requestReplenishKeys: "card.serverMessage.requestReplenishKeys"
        case .requestRenewCard: "card.serverMessage.requestRenewCard"
        case .requestRenewODACert: "card.serverMessage.requestRenewODACert"
        }
    }
}

/// The card state machine (CONTRACT.md §3). `deleted` is terminal; a card never seen is absent (`nil`).
enum CardLifecycle {
    enum Transition: Equatable {
        /// The message applies; the card ends in `state` (equal to the previous one for a no-change transition).
        case moves(to: CardState)
        /// The message is forbidden in the card's current state: it stops the stack.
        case refused(LifecycleError)
    }

    /// Why a message was refused, with the vendor's CPS error codes.
    enum LifecycleError: Equatable {
        /// 524, token not found: the card is absent.
        case unknownDigitalCardID
        /// 561, incorrect card state: any other forbidden transition, a deleted card included.
        case cardStateDoesNotAllowRequestedOperation

        var kind: String {
            switch self {
            case .unknownDigitalCardID: "unknownDigitalCardID"
            case .cardStateDoesNotAllowRequestedOperation: "cardStateDoesNotAllowRequestedOperation"
            }
        }

        var code: Int {
            switch self {
            case .unknownDigitalCardID: 524
            case .cardStateDoesNotAllowRequestedOperation: 561
            }
        }
    }

    /// The transition table, row by row as the contract writes it.
    static func transition(_ message: KnownMessage, from state: CardState?) -> Transition {
        switch (message, state) {
        case (.requestInstallCard, nil): .moves(to: .active)
        case (.requestInstallCard, .active): .moves(to: .active)

        case (.requestSuspendCard, .active): .moves(to: .suspended)
        case (.requestSuspendCard, .suspended): .moves(to: .suspended)

        case (.requestResumeCard, .suspended): .moves(to: .active)
        case (.requestResumeCard, .active): .moves(to: .active)

        case (.requestDeleteCard, .active), (.requestDeleteCard, .suspended): .moves(to: .deleted)
        case (.requestDeleteCard, .deleted): .moves(to: .deleted)

        case (.requestReplenishKeys, .active): .moves(to: .active)

        case (.requestRenewCard, .active), (.requestRenewODACert, .active): .moves(to: .active)
        case (.requestRenewCard, .suspended), (.requestRenewODACert, .suspended): .moves(to: .suspended)

        case (_, nil): .refused(.unknownDigitalCardID)
        case (_, .some): .refused(.cardStateDoesNotAllowRequestedOperation)
        }
    }
}

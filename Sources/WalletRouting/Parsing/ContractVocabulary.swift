/// The contract's vocabulary (CONTRACT.md §2-§7): member names and enumerated values a notification carries.
///
/// The parser returns these as string literals instead of building a new `String` from the bytes: a literal
/// costs no allocation and no reference counting, and these strings make up most of every body.
enum ContractVocabulary {
    /// The literal spelled exactly as `bytes` (ASCII), or nil.
    @inline(__always)
    static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard let base = bytes.baseAddress else { return nil }
        switch bytes.count {
        case 2:
            if matches(base, "MG") { return "MG" }
            if matches(base, "id") { return "id" }
            return nil
        case 3:
            if matches(base, "CHF") { return "CHF" }
            if matches(base, "CPS") { return "CPS" }
            if matches(base, "EUR") { return "EUR" }
            if matches(base, "GBP") { return "GBP" }
            if matches(base, "LUK") { return "LUK" }
            if matches(base, "SUK") { return "SUK" }
            if matches(base, "TNS") { return "TNS" }
            if matches(base, "USD") { return "USD" }
            if matches(base, "aps") { return "aps" }
            if matches(base, "fcm") { return "fcm" }
            return nil
        case 4:
            if matches(base, "apns") { return "apns" }
            if matches(base, "body") { return "body" }
            if matches(base, "code") { return "code" }
            if matches(base, "date") { return "date" }
            if matches(base, "info") { return "info" }
            if matches(base, "tags") { return "tags" }
            if matches(base, "text") { return "text" }
            if matches(base, "type") { return "type" }
            return nil
        case 5:
            if matches(base, "alert") { return "alert" }
            if matches(base, "badge") { return "badge" }
            if matches(base, "error") { return "error" }
            if matches(base, "other") { return "other" }
            if matches(base, "sound") { return "sound" }
            if matches(base, "title") { return "title" }
            return nil
        case 6:
            if matches(base, "action") { return "action" }
            if matches(base, "amount") { return "amount" }
            if matches(base, "params") { return "params" }
            if matches(base, "refund") { return "refund" }
            if matches(base, "sender") { return "sender" }
            if matches(base, "status") { return "status" }
            return nil
        case 7:
            if matches(base, "cleared") { return "cleared" }
            if matches(base, "default") { return "default" }
            if matches(base, "keyType") { return "keyType" }
            if matches(base, "message") { return "message" }
            if matches(base, "primary") { return "primary" }
            if matches(base, "unknown") { return "unknown" }
            if matches(base, "warning") { return "warning" }
            return nil
        case 8:
            if matches(base, "approved") { return "approved" }
            if matches(base, "declined") { return "declined" }
            if matches(base, "platform") { return "platform" }
            if matches(base, "purchase") { return "purchase" }
            if matches(base, "refunded") { return "refunded" }
            if matches(base, "severity") { return "severity" }
            return nil
        case 9:
            if matches(base, "auxiliary") { return "auxiliary" }
            return nil
        case 10:
            if matches(base, "merchantID") { return "merchantID" }
            if matches(base, "terminalID") { return "terminalID" }
            return nil
        case 11:
            if matches(base, "pushChannel") { return "pushChannel" }
            if matches(base, "transaction") { return "transaction" }
            return nil
        case 12:
            if matches(base, "currencyCode") { return "currencyCode" }
            if matches(base, "merchantName") { return "merchantName" }
            if matches(base, "merchantType") { return "merchantType" }
            return nil
        case 13:
            if matches(base, "atmWithdrawal") { return "atmWithdrawal" }
            if matches(base, "digitalCardID") { return "digitalCardID" }
            if matches(base, "digitalCardId") { return "digitalCardId" }
            if matches(base, "displayAmount") { return "displayAmount" }
            if matches(base, "serverMessage") { return "serverMessage" }
            return nil
        case 14:
            if matches(base, "installationId") { return "installationId" }
            if matches(base, "serverMessages") { return "serverMessages" }
            return nil
        case 15:
            if matches(base, "atmOtherService") { return "atmOtherService" }
            if matches(base, "tokenizedCardId") { return "tokenizedCardId" }
            return nil
        case 17:
            if matches(base, "content-available") { return "content-available" }
            return nil
        case 18:
            if matches(base, "merchantPostalCode") { return "merchantPostalCode" }
            return nil
        case 19:
            if matches(base, "CBP.error.pinLocked") { return "CBP.error.pinLocked" }
            return nil
        case 21:
            if matches(base, "CBP.info.tokenDeleted") { return "CBP.info.tokenDeleted" }
            if matches(base, "CBP.info.tokenRenewed") { return "CBP.info.tokenRenewed" }
            if matches(base, "CBP.info.tokenResumed") { return "CBP.info.tokenResumed" }
            if matches(base, "transactionRecordType") { return "transactionRecordType" }
            return nil
        case 22:
            if matches(base, "isAuxiliaryTransaction") { return "isAuxiliaryTransaction" }
            return nil
        case 23:
            if matches(base, "CBP.info.tokenSuspended") { return "CBP.info.tokenSuspended" }
            return nil
        case 24:
            if matches(base, "CBP.info.paymentAccepted") { return "CBP.info.paymentAccepted" }
            return nil
        case 25:
            if matches(base, "CBP.info.tokenProvisioned") { return "CBP.info.tokenProvisioned" }
            if matches(base, "CBP.info.tokenReplenished") { return "CBP.info.tokenReplenished" }
            return nil
        case 28:
            if matches(base, "CBP.info.tokenODACertRenewed") { return "CBP.info.tokenODACertRenewed" }
            return nil
        case 34:
            if matches(base, "MG:ReplenishmentNeededNotification") { return "MG:ReplenishmentNeededNotification" }
            if matches(base, "TNS:PaymentTransactionNotification") { return "TNS:PaymentTransactionNotification" }
            return nil
        default:
            return nil
        }
    }

    @inline(__always)
    private static func matches(_ base: UnsafePointer<UInt8>, _ literal: StaticString) -> Bool {
        let start = literal.utf8Start
        for index in 0..<literal.utf8CodeUnitCount where base[index] != start[index] {
            return false
        }
        return true
    }
}

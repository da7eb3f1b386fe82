import Foundation
import WalletRouting
import WalletStore

/// What `wallet-worker inspect` prints: one JSON object per answer, decoded from the store's columns and blobs
/// (times as ISO 8601 in UTC, bodies as the JSON they are).
public enum InspectionJSON {
    /// - Parameter now: for `paymentKeys.expired`.
    public static func card(_ inspected: InspectedCard, now: Date) -> [UInt8] {
        let card = inspected.card
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("digitalCardId")
        writer.string(card.digitalCardId)
        writer.key("state")
        writer.string(card.state.rawValue)
        writer.key("tokenizedCardId")
        writer.string(card.tokenizedCardId)
        writer.key("keyType")
        writer.string(card.keyType.rawValue)
        writer.key("paymentKeys")
        if let keys = card.paymentKeys {
            writer.beginObject()
            writer.key("numberOfPaymentsLeft")
            writer.int(keys.numberOfPaymentsLeft)
            writer.key("expiresAt")
            writer.string(timestamp(Date(timeIntervalSince1970: keys.expiresAt)))
            writer.key("expired")
            writer.bool(keys.expiresAt <= now.timeIntervalSince1970)
            writer.endObject()
        } else {
            writer.null()
        }
        writer.key("transactionCount")
        writer.int(inspected.transactionCount)
        writer.key("transactions")
        writer.beginArray()
        for record in inspected.transactions {
            record.write(to: &writer)
        }
        writer.endArray()
        writer.endObject()
        return writer.takeBytes()
    }

    public static func message(_ message: ProcessedMessage) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("messageId")
        writer.string(message.messageID)
        writer.key("recordedAt")
        writer.string(timestamp(message.recordedAt))
        writer.key("outcome")
        writer.string(message.outcome.rawValue)
        writer.key("sender")
        writer.string(message.sender)
        writer.key("digitalCardId")
        writer.string(message.digitalCardId)
        writer.key("results")
        writer.beginArray()
        for result in message.results {
            writer.result(result)
        }
        writer.endArray()
        // Its effects are committed, and these results were never delivered: the message was dead-lettered.
        writer.key("undelivered")
        if let undelivered = message.undelivered {
            writer.beginObject()
            writer.key("deadLetteredAt")
            writer.string(timestamp(undelivered.deadLetteredAt))
            writer.key("reason")
            writer.string(undelivered.reason)
            writer.key("error")
            writer.string(undelivered.error)
            writer.key("replay")
            writer.string(
                "its effects are committed and its results above were never delivered; a replay of its dead letter "
                    + "(`wallet-worker dead-letters replay --message-id \(message.messageID)`) publishes them again, "
                    + "byte for byte, and applies nothing")
            writer.endObject()
        } else {
            writer.null()
        }
        writer.endObject()
        return writer.takeBytes()
    }

    /// The push channel is a device's push token: shown only when asked (`--show-push-channel`), else its length
    /// and last four characters, enough to tell two apart.
    public static func installation(_ installation: Installation, showPushChannel: Bool) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("installationId")
        writer.string(installation.installationId)
        writer.key("platform")
        writer.string(installation.platform)
        writer.key("pushChannel")
        writer.string(showPushChannel ? installation.pushChannel : masked(installation.pushChannel))
        writer.key("tags")
        writer.beginArray()
        for tag in installation.tags {
            writer.string(tag)
        }
        writer.endArray()
        writer.endObject()
        return writer.takeBytes()
    }

    static func masked(_ pushChannel: String) -> String {
        "…\(pushChannel.suffix(4)) (\(pushChannel.count) characters; --show-push-channel shows it)"
    }

    private static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

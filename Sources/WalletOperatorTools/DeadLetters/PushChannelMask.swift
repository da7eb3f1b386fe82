import WalletRouting

/// A device installation's `pushChannel` is a device's push token (CONTRACT.md §7: never echoed in results or
/// logs); the tools show only its last four characters unless asked.
enum PushChannelMask {
    /// The body with a top-level string `pushChannel` masked; any other body unchanged. The rest of the document
    /// is written back as parsed (members in order, numbers as written).
    static func masked(_ body: [UInt8]) -> [UInt8] {
        guard body.count <= 1 << 20, let value = try? JSONParser.parse(body), case .object(var object) = value,
            object.members.contains(where: { $0.key == "pushChannel" })
        else { return body }
        for index in object.members.indices where object.members[index].key == "pushChannel" {
            if case .string(let token) = object.members[index].value {
                object.members[index].value = .string(masked(token))
            }
        }
        var writer = JSONWriter()
        writer.value(.object(object))
        return writer.takeBytes()
    }

    static func masked(_ pushChannel: String) -> String {
        "…\(pushChannel.suffix(4)) (\(pushChannel.count) characters; --show-push-channel shows it)"
    }
}

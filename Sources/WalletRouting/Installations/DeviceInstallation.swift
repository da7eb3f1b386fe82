/// Device installations (CONTRACT.md §7): messages whose AMQP `type` is `DeviceInstallation` or
/// `DeviceInstallationDeleted`, whatever their body says.
///
/// Fields are checked in the order `installationId`, `platform`, `pushChannel`, `tags`; an invalid one gives an
/// `installationOutcome` with outcome `rejected` and a reason naming it, and the message is acknowledged (it is
/// an answer, not poison). Lengths count Unicode scalars. The push token never appears in a result.
extension NotificationRouter {
    static let maximumInstallationIdLength = 256
    static let maximumTagCount = 60
    static let maximumTagLength = 120

    func routeDeviceInstallation(
        _ payload: JSONObject, deleted: Bool, envelope: inout ResultEnvelope
    ) -> Handled {
        let receivedId = payload["installationId"]?.stringValue
        var platform: String?

        func publish(outcome: InstallationOutcome, reason: String? = nil) {
            envelope.publish(
                .installationOutcome, exchange: settings.exchanges.installations, routingKey: outcome.routingKey
            ) {
                $0.key("installationId")
                $0.string(receivedId)
                if let platform {
                    $0.key("platform")
                    $0.string(platform)
                }
                $0.key("outcome")
                $0.string(outcome.rawValue)
                if let reason {
                    $0.key("reason")
                    $0.string(reason)
                }
            }
        }

        do throws(Rejection) {
            let installationId = try Self.installationId(receivedId)
            if deleted {
                publish(outcome: .deleted)
                return Handled(effects: [.deleteInstallation(installationId: installationId)], outcome: .processed)
            }
            let validPlatform = try Self.platform(payload["platform"])
            platform = validPlatform
            let pushChannel = try Self.pushChannel(payload["pushChannel"], platform: validPlatform)
            let tags = try Self.tags(payload["tags"])
            publish(outcome: .registered)
            let installation = Installation(
                installationId: installationId, platform: validPlatform, pushChannel: pushChannel, tags: tags
            )
            return Handled(effects: [.upsertInstallation(installation)], outcome: .processed)
        } catch {
            publish(outcome: .rejected, reason: error.reason)
            return Handled(effects: [], outcome: .domainError)
        }
    }

    private static func installationId(_ value: String?) throws(Rejection) -> String {
        guard let value, !value.isEmpty, value.unicodeScalars.count <= maximumInstallationIdLength else {
            throw Rejection("installationId is required: a non-empty string of at most 256 characters")
        }
        return value
    }

    /// `apns` or `fcm`, case-insensitive; normalised lower-case.
    private static func platform(_ value: JSONValue?) throws(Rejection) -> String {
        guard case .string(let text)? = value else { throw Rejection("platform is required: apns or fcm") }
        if ASCIICase.equals(text, "apns") { return "apns" }
        if ASCIICase.equals(text, "fcm") { return "fcm" }
        throw Rejection("platform must be apns or fcm")
    }

    /// Non-empty; for APNs an even-length hex string, stored upper-case (the client renders it `%02X`).
    private static func pushChannel(_ value: JSONValue?, platform: String) throws(Rejection) -> String {
        guard case .string(let token)? = value, !token.isEmpty else {
            throw Rejection("pushChannel is required: a non-empty string")
        }
        guard platform == "apns" else { return token }
        var upper: [UInt8] = []
        upper.reserveCapacity(token.utf8.count)
        for byte in token.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "F"): upper.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): upper.append(byte - 0x20)
            default: throw Rejection("pushChannel must be a hexadecimal device token for apns")
            }
        }
        guard upper.count % 2 == 0 else {
            throw Rejection("pushChannel must have an even number of hexadecimal digits for apns")
        }
        return String(decoding: upper, as: UTF8.self)
    }

    /// Optional: at most 60 strings of 1-120 characters of `[A-Za-z0-9_@#.:-]`.
    private static func tags(_ value: JSONValue?) throws(Rejection) -> [String] {
        switch value {
        case nil, .null?:
            return []
        case .array(let elements)?:
            guard elements.count <= maximumTagCount else {
                throw Rejection("tags: at most \(maximumTagCount) tags are allowed, got \(elements.count)")
            }
            var tags: [String] = []
            tags.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                guard case .string(let tag) = element, isValidTag(tag) else {
                    throw Rejection(
                        "tags[\(index)] must be a string of 1-\(maximumTagLength) characters of A-Z a-z 0-9 _ @ # . : -"
                    )
                }
                tags.append(tag)
            }
            return tags
        default:
            throw Rejection("tags must be an array of strings when present")
        }
    }

    private static func isValidTag(_ tag: String) -> Bool {
        // Every allowed character is ASCII, so bytes count characters here.
        let utf8 = tag.utf8
        guard (1...maximumTagLength).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "@"), UInt8(ascii: "#"),
                UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}

/// The `outcome` of an installation result; routing key `installation.<outcome>`.
enum InstallationOutcome: String {
    case registered
    case deleted
    case rejected

    var routingKey: String {
        switch self {
        case .registered: "installation.registered"
        case .deleted: "installation.deleted"
        case .rejected: "installation.rejected"
        }
    }
}

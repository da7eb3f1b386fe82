extension InboundMessage {
    /// The body's `digitalCardId` as the routing core reads it (CONTRACT.md §2: the key matched case-insensitively,
    /// the exact spelling first; a non-empty string), or nil when the body is not a JSON object or has none.
    ///
    /// For publishers: the ordered mode hashes a `digitalCardId` header, because the broker cannot read the body.
    public var bodyDigitalCardId: String? {
        guard let object = (try? JSONParser.parse(body))?.objectValue else { return nil }
        return NotificationFields(object).digitalCardIdString
    }
}

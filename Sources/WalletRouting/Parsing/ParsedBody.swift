/// A message's body parsed once, by a caller that reads it before routing (the PostgreSQL store's foresight,
/// `NotificationRouter.foreseeReads`), for `NotificationRouter.route(_:body:state:now:)`: the body is then not parsed
/// a second time, nor again on each routing pass of the same batch.
public struct ParsedBody: Sendable {
    let value: Result<JSONValue, JSONParseError>

    /// Parses `bytes`, the body of the message it will be routed with.
    public init(_ bytes: [UInt8]) {
        value = Result { () throws(JSONParseError) in try JSONParser.parse(bytes) }
    }
}

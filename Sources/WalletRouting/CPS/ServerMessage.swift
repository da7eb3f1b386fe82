/// One CPS server message (CONTRACT.md §3): `{"code":...,"text":...,"severity":...,"params":[...]}`.
struct ServerMessage {
    /// Matched exactly against the known codes.
    let code: String
    /// `text` as received; nil when absent (echoed as `null`).
    let text: JSONValue?
    /// `params` as received; nil when absent or null (echoed as `[]`).
    let params: JSONValue?
    let severity: Severity

    enum Severity: String {
        case info
        case warning
        case error
        case unknown

        /// Lower-cased; `unknown` when absent, not a string or not one of the four.
        init(_ value: JSONValue?) {
            guard case .string(let text)? = value else {
                self = .unknown
                return
            }
            if ASCIICase.equals(text, "info") {
                self = .info
            } else if ASCIICase.equals(text, "warning") {
                self = .warning
            } else if ASCIICase.equals(text, "error") {
                self = .error
            } else {
                self = .unknown
            }
        }
    }

    /// nil unless `value` is an object with a non-empty string `code`.
    init?(_ value: JSONValue) {
        guard case .object(let object) = value, case .string(let code)? = object["code"], !code.isEmpty else {
            return nil
        }
        self.code = code
        let text = object["text"]
        self.text = text
        let params = object["params"]
        self.params = params?.isNull == true ? nil : params
        self.severity = Severity(object["severity"])
    }

    var knownMessage: KnownMessage? { KnownMessage(code: code) }

    /// The normalised echo: `code` and `text` as received, `severity` normalised, `params` as received.
    func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("code")
        writer.string(code)
        writer.key("text")
        if let text { writer.value(text) } else { writer.null() }
        writer.key("severity")
        writer.string(severity.rawValue)
        writer.key("params")
        if let params {
            writer.value(params)
        } else {
            writer.beginArray()
            writer.endArray()
        }
        writer.endObject()
    }

    /// The payload's messages in order, or nil when they are unusable. `serverMessages` wins over
    /// `serverMessage`; the stack is validated as a whole (an empty array, a non-array or one bad element
    /// makes the payload unusable) so that nothing is applied from a stack that would be refused later.
    static func stack(of payload: JSONObject) -> [ServerMessage]? {
        if let messages = payload["serverMessages"], !messages.isNull {
            guard case .array(let elements) = messages, !elements.isEmpty else { return nil }
            var stack: [ServerMessage] = []
            stack.reserveCapacity(elements.count)
            for element in elements {
                guard let message = ServerMessage(element) else { return nil }
                stack.append(message)
            }
            return stack
        }
        guard let message = payload["serverMessage"], let serverMessage = ServerMessage(message) else {
            return nil
        }
        return [serverMessage]
    }
}

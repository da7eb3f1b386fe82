import Testing

@testable import AMQPTransport

/// An `AMQP_URL` that does not parse is reported (thrown, then logged by the worker) without its password,
/// wherever a malformed URL puts it (issue 13).
@Suite("AMQP URI errors never show the password")
struct AMQPURLRedactionTests {
    @Test(arguments: [
        // A bad percent escape in the password: the old message quoted the password.
        ("amqp://svc:S3cr%t@h/", "S3cr", "bad percent-encoding in the password"),
        // Not UTF-8 once decoded.
        ("amqp://svc:S3cr%FF@h/", "S3cr", "not UTF-8"),
        // A '/' in the password ends the authority: `svc:pa` is read as host and port, and the old message
        // quoted the port ('pa').
        ("amqp://svc:pa/ss@h/", "pa/ss", "write '/' in the user name or password as %2F"),
        ("amqp://svc:Zq/Xw@h/", "Zq", "the port is not a number"),
        ("amqp://svc:Zq/Xw@h/", "Xw", "%2F"),
        // A '/' in the password and a bad escape after it: the old message quoted the vhost ('x%zz@h').
        ("amqp://svc:12/x%zz@h", "x%zz", "bad percent-encoding in the vhost"),
        // The port is wrong, the password is not part of the reason.
        ("amqp://svc:secret@h:notaport/", "secret", "the port is not a number"),
        ("amqp://svc:secret@h/a/b", "secret", "one path segment"),
        ("amqp://svc:secret@h/v%zz", "secret", "bad percent-encoding in the vhost"),
        ("amqp://svc:sec?ret@h/", "sec?ret", "query parameters"),
        ("amqp://svc:secret@[::1/", "secret", "IPv6"),
        ("http://svc:secret@h/", "secret", "scheme"),
    ])
    func theErrorNamesTheProblemWithoutThePassword(_ text: String, _ secret: String, _ reason: String) {
        do throws(AMQPError) {
            _ = try AMQPURL(parsing: text)
            Issue.record("\(AMQPURL.redacted(text)) parsed")
        } catch {
            #expect(error.code == .invalidURL)
            for shown in [error.description, "\(error)", String(reflecting: error), error.message] {
                #expect(!shown.contains(secret), "the error shows the password: \(AMQPURL.redacted(shown))")
                #expect(shown.contains(reason), "\(shown)")
            }
        }
    }

    @Test func theErrorShowsTheURLWithThePasswordMasked() {
        do throws(AMQPError) {
            _ = try AMQPURL(parsing: "amqp://svc:S3cr%t@broker.internal:5672/prod")
            Issue.record("parsed")
        } catch {
            #expect(error.message.contains("amqp://svc:***@broker.internal:5672/prod"), "\(error.message)")
        }
    }

    @Test(arguments: [
        ("amqp://svc:pa/ss@h/", "amqp://svc:***@h/"),
        ("amqps://u:p@ss@h:5671/v", "amqps://u:***@h:5671/v"),
        ("amqp://u@h/", "amqp://u@h/"),
        ("amqp://h:5672/v", "amqp://h:5672/v"),
        ("svc:secret@h", "svc:***@h"),
        ("amqp:/svc:secret@h", "amqp:***@h"),
    ])
    func redactedMasksEverythingBetweenTheUserAndTheHost(_ text: String, _ expected: String) {
        #expect(AMQPURL.redacted(text) == expected)
    }

    @Test func validURLsStillParse() throws {
        let url = try AMQPURL(parsing: "amqp://svc:pa%2Fss@h/")
        #expect(url.password == "pa/ss")
        #expect(url.host == "h")
        #expect(try AMQPURL(parsing: "amqp://svc:S3cr%25t@h/").password == "S3cr%t")
    }
}

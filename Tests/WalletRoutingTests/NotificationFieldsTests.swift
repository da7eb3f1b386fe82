import Testing

@testable import WalletRouting

@Suite("Case-insensitive top-level keys (CONTRACT.md §2)")
struct NotificationFieldsTests {
    static func fields(_ json: String) throws -> NotificationFields {
        NotificationFields(try #require(try JSONValue(json: json).objectValue))
    }

    @Test(arguments: [
        (#"{"digitalCardId":"exact"}"#, "exact"),
        (#"{"digitalCardID":"vendor"}"#, "vendor"),
        (#"{"DIGITALCARDID":"upper"}"#, "upper"),
        (#"{"digitalCardID":"first","DigitalCardId":"second"}"#, "first"),
        (#"{"digitalCardID":"other","digitalCardId":"exact"}"#, "exact"),
        (#"{"digitalCardId":"exact1","digitalCardId":"exact2"}"#, "exact1"),
        (#"{"digitalCardId":null,"digitalCardID":"other"}"#, nil),  // the exact spelling wins, null is absent
        (#"{"digitalCardID":null,"DIGITALCARDID":"other"}"#, nil),  // the first spelling wins
        (#"{"digitalCardId":""}"#, nil),
        (#"{"digitalCardId":1}"#, nil),
        (#"{"digital_card_id":"x"}"#, nil),
        (#"{"digitalCardİd":"x"}"#, nil),  // not ASCII
        (#"{"nested":{"digitalCardId":"x"}}"#, nil),
    ])
    func digitalCardId(_ json: String, _ expected: String?) throws {
        #expect(try Self.fields(json).digitalCardIdString == expected)
    }

    @Test func allFourKeys() throws {
        let fields = try Self.fields(
            #"{"SENDER":"tns","Action":"a","TRANSACTIONRECORDTYPE":"Primary","DigitalCardId":"d"}"#)
        #expect(fields.senderString == "tns")
        #expect(fields.senderLabel == "TNS")
        #expect(fields.actionString == "a")
        #expect(fields.transactionRecordType == .string("Primary"))
        #expect(fields.digitalCardIdString == "d")
    }

    @Test(arguments: [
        ("CPS", SDKSender.cps), ("cps", .cps), ("cPs", .cps), ("TNS", .tns), ("tns", .tns), ("MG", .mg), ("mg", .mg),
    ])
    func sdkSenders(_ value: String, _ expected: SDKSender) {
        #expect(SDKSender(value) == expected)
    }

    @Test(arguments: ["", "CPS ", "C PS", "cpſ", "ＣＰＳ", "M", "MGX", "NFC"])
    func otherSenders(_ value: String) {
        #expect(SDKSender(value) == nil)
    }
}

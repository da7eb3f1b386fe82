import Testing
import WalletRouting

/// The card id a publisher copies into the ordered mode's hash header: the one the routing core reads.
@Suite struct BodyDigitalCardIdTests {
    @Test(
        arguments: [
            (#"{"sender":"CPS","digitalCardId":"DC-1"}"#, "DC-1"),
            (#"{"digitalCardID":"DC-2"}"#, "DC-2"),
            (#"{"digitalcardid":"DC-3","digitalCardId":"DC-4"}"#, "DC-4"),
            (#"{"digitalCardId":null,"digitalCardID":"X"}"#, nil),
            (#"{"digitalCardId":""}"#, nil),
            (#"{"digitalCardId":42}"#, nil),
            (#"{"action":"x"}"#, nil),
            (#"["DC-1"]"#, nil),
            ("not json", nil),
        ] as [(String, String?)])
    func readsTheCardIdAsTheRouterDoes(body: String, expected: String?) {
        #expect(InboundMessage(body: Array(body.utf8)).bodyDigitalCardId == expected)
    }
}

/// The text the recorded results are compressed against (`RecordedResultsEncoding`, version 2): the parts every
/// result repeats, so a message's results compress about 3.7 to 1 on their own (LZ4 alone: 2.2).
///
/// Written from the results' shapes, the contract's names and the router's vocabulary, not from any data: result
/// kinds, field names, the default exchanges and routing keys, enumerations. Never edit it: every store holds
/// values compressed against it until its retention sweep has deleted them. A better one is a new encoding
/// version with a dictionary of its own, beside this one.
enum RecordedResultsDictionary {
    static let version2 = LZ4Block.Dictionary(Array(text.utf8))

    private static let text = #"""
        wallet.installations installation.upserted installation.deleted installationOutcome {"kind":"installationOutcome","messageId":"","correlationId":"","sender":null,"processedAt":"","installationId":"","platform":"apns","fcm","pushChannel":"","tags":[],"outcome":"changed","unchanged","absent","cleared","error":{"kind":"","message":""}}\#
        wallet.replenishment replenishment.replenished replenishment.failed replenishment.notNeeded replenishmentOutcome {"kind":"replenishmentOutcome","messageId":"","correlationId":"","sender":"MG","processedAt":"","digitalCardId":"","isForced":false,"outcome":"replenished","numberOfPaymentsLeft":10,"expiresAt":"","keyInfo":{"keyType":"SUK","LUK","expiryDate":""},"needsReplenishment":true,"error":{"kind":"replenishmentNotAllowed","cardStateDoesNotAllowRequestedOperation","message":"the digital card is deleted"}}\#
        wallet.actions action.refreshWallet actionTriggered {"kind":"actionTriggered","messageId":"","correlationId":"","sender":null,"processedAt":"","action":"refreshWallet","silent":true,"message":"Wallet refresh requested","payload":{"aps":{"alert":{"title":"","body":""},"badge":1,"sound":"default","content-available":1}}}\#
        wallet.events card.installed card.suspended card.resumed card.deleted card.renewed card.errorEncountered cardEvent {"kind":"cardEvent","messageId":"","correlationId":"","sender":"CPS","processedAt":"","event":"errorEncountered","digitalCardId":"","tokenizedCardId":"","serverMessage":{"code":"CBP.info.tokenProvisioned","CBP.info.tokenSuspended","CBP.info.tokenResumed","CBP.info.tokenDeleted","CBP.info.tokenRenewed","CBP.info.paymentAccepted","CBP.error.","text":"","severity":"info","warning","params":[]},"serverMessages":[],"knownMessage":"requestRenewCard","state":"active","suspended","deleted","previousState":null,"reason":"unsupportedPushContent","error":{"kind":"unknownDigitalCardID","code":524,"message":" refused: the digital card is unknown"}}\#
        wallet.transactions transactions.records transactionRecords {"kind":"transactionRecords","messageId":"","correlationId":"","sender":"TNS","processedAt":"2026-01-01T00:00:00.000Z","digitalCardId":"","transactionRecordType":"primary","auxiliary",null,"records":[{"id":"","date":"2026-01-01T00:00:00Z","status":"approved","declined","refunded","completed","type":"purchase","refund","atmWithdrawal","atmOtherService","other","currencyCode":"EUR","USD","GBP","CHF","amount":0.00,"displayAmount":"","merchantName":"","merchantType":"","merchantPostalCode":"","terminalID":"","merchantID":"","isAuxiliaryTransaction":false},{"id":"","date":"2026-01-01T00:00:00Z","status":"approved","type":"purchase","currencyCode":"EUR","amount":0.00,"merchantName":"","isAuxiliaryTransaction":true}]}\#

        """#
}

/// The `kind` of a result body, also its AMQP `type` property (CONTRACT.md §9).
enum ResultKind: String {
    case cardEvent
    case transactionRecords
    case replenishmentOutcome
    case actionTriggered
    case installationOutcome
    case rejected
}

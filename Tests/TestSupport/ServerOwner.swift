import Foundation

/// The environment that ties a server a script starts for a test (a broker, a cluster, PostgreSQL) to the test
/// process: when the process ends, even crashed, the server is stopped (`WALLET_OWNER_PID`,
/// scripts/lib/stop-with-owner.sh).
public let serverOwnerEnvironment = ["WALLET_OWNER_PID": "\(getpid())"]

# shellcheck shell=bash
# Sourced by the scripts that start servers for tests (rabbitmq-local.sh, rabbitmq-cluster.sh, postgres-local.sh).
#
#   stop_with_owner PID MARK SIGNAL
#
# When the process $WALLET_OWNER_PID ends, however it ends (a test run killed, a test process crashed), sends SIGNAL
# to PID, if PID is still the server that was started: its command line still contains MARK (its data directory or
# configuration file). Pids are reused (32,768 of them on this machine), so a server stopped in between is never
# mistaken for whatever process has its pid now. Does nothing when WALLET_OWNER_PID is unset; when it has already
# ended (killed while the server was starting), the server is stopped at once.
#
# scripts/test.sh, the benchmark and profile scripts and check-rabbitmq-definitions.sh set WALLET_OWNER_PID to their
# own pid, and the integration tests to the test process's (serverOwnerEnvironment in Tests/TestSupport): a run that
# ends without its teardowns leaves no broker, cluster or PostgreSQL behind.
stop_with_owner() {
    local owner="${WALLET_OWNER_PID:-}" pid="$1" mark="$2" signal="$3"
    [ -n "$owner" ] || return 0
    # Detached from the caller's session and descriptors: whoever waits for the starting script's output or process
    # group does not wait for the watcher.
    setsid bash -c '
        tail --pid="$1" -f /dev/null
        if tr "\0" " " < "/proc/$2/cmdline" 2>/dev/null | grep -qF -- "$3"; then kill "-$4" "$2"; fi
    ' stop-with-owner "$owner" "$pid" "$mark" "$signal" > /dev/null 2>&1 < /dev/null &
}

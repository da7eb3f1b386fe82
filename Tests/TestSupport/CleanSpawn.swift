#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `posix_spawn` for the tests' child processes (brokers, workers, scripts): the child starts with no signal
/// blocked and every handler at its default. The spawning thread is a Swift concurrency worker, which blocks
/// signals; a child that inherited that mask would start with SIGTERM blocked and could only be killed.
///
/// Returns `posix_spawn`'s status (0 on success) and sets `pid`.
public func spawnWithCleanSignals(
    _ pid: inout pid_t, executable: String, arguments: [String], environment: [String],
    fileActions: inout posix_spawn_file_actions_t
) -> Int32 {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    var allSignals = sigset_t()
    sigfillset(&allSignals)
    posix_spawnattr_setsigdefault(&attributes, &allSignals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    return withCStrings(arguments) { argv in
        withCStrings(environment) { envp in
            posix_spawn(&pid, executable, &fileActions, &attributes, argv, envp)
        }
    }
}

/// `strings` as a NULL-terminated C array, for `body` only.
public func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers = strings.map { strdup($0) }
    pointers.append(nil)
    defer { pointers.forEach { free($0) } }
    return body(pointers)
}

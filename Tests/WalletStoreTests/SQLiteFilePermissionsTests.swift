import Foundation
import Testing
import WalletRouting

@testable import WalletStore

/// The SQLite file holds push tokens: it and its -wal and -shm files are 0600 whatever the umask (issue 13).
///
/// Serialized: the umask belongs to the whole process. Suites running meanwhile create their files under the umask
/// set here (022, the usual one, or 000, which only widens their temporary files); never one that takes the
/// owner's own bits away, which would break them.
@Suite(.serialized) struct SQLiteFilePermissionsTests {
    private static func mode(_ path: String) -> mode_t? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o777
    }

    private static func withUmask<T>(_ mask: mode_t, _ body: () async throws -> T) async rethrows -> T {
        let previous = umask(mask)
        defer { umask(previous) }
        return try await body()
    }

    @Test(arguments: [0o022, 0o000] as [mode_t])
    func aNewStoreAndItsWALAndSharedMemoryFilesAreOwnerOnly(umask mask: mode_t) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try await Self.withUmask(mask) {
                let store = try SQLiteWalletStore(configuration: .init(path: path))
                // A committed batch: the WAL and the shared-memory index exist from here until the last close.
                _ = try await store.process(
                    [Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
                return store
            }
            for file in [path, path + "-wal", path + "-shm"] {
                let mode = try #require(Self.mode(file), "\(file) does not exist")
                #expect(
                    mode == 0o600, "\(URL(fileURLWithPath: file).lastPathComponent) has mode \(String(mode, radix: 8))")
            }
            await store.close()
        }
    }

    @Test func anExistingFileReadableByOthersIsRestrictedToItsOwnerWithAWarning() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            // A store an older build left with 0644, its WAL still there (as after a crash).
            let old = try SQLiteWalletStore(configuration: .init(path: path))
            _ = try await old.process([Messages.install("DC-1", id: "m1")], router: NotificationRouter(), now: Date())
            for file in [path, path + "-wal", path + "-shm"] { #expect(chmod(file, 0o644) == 0) }

            let store = try SQLiteWalletStore(configuration: .init(path: path))
            for file in [path, path + "-wal", path + "-shm"] {
                #expect(Self.mode(file) == 0o600, "\(file)")
            }
            #expect(store.permissionWarnings.count == 3)
            #expect(
                store.permissionWarnings.first?.contains("wallet.sqlite was readable by other users (mode 644)") == true
            )
            // Still the same data.
            let harness = StoreHarness(store: store, path: path)
            #expect(try await harness.card("DC-1") != nil)
            await store.close()
            await old.close()
        }
    }

    @Test func anOwnerOnlyFileIsLeftAsItIs() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try SQLiteWalletStore(configuration: .init(path: path))
            #expect(store.permissionWarnings.isEmpty)
            await store.close()
            #expect(chmod(path, 0o400) == 0)  // read-only on purpose: not widened
            #expect(SQLiteFilePermissions.prepare(path: path).isEmpty)
            #expect(Self.mode(path) == 0o400)
        }
    }
}

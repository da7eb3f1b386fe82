import Foundation

/// Counts the pages a SQLite store writes to its write-ahead log, by page number, read from the `-wal` file itself
/// between batches: which B-tree (table or index) each written page belongs to is then looked up in `dbstat`.
/// What the bytes written per message are made of: a commit appends every page the batch changed, once.
///
/// The log is read after every commit, before the next transaction can restart it over a checkpoint: a frame
/// belongs to the current log when its salts are the header's (a restarted log gets new salts and overwrites from
/// the start; frames of the older generation beyond it are skipped).
struct WALPageCounter {
    let path: String
    private(set) var pages: [UInt32: Int] = [:]
    private(set) var frames = 0
    private var salts: (UInt32, UInt32)?
    private var offset = 32

    init(databasePath: String) {
        path = databasePath + "-wal"
    }

    /// Counts the frames appended since the last call.
    mutating func readNewFrames() {
        guard let handle = FileHandle(forReadingAtPath: path) else { return }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 32), header.count == 32 else { return }
        let pageSize = Int(Self.bigEndian(header, at: 8))
        let headerSalts = (Self.bigEndian(header, at: 16), Self.bigEndian(header, at: 20))
        if salts.map({ $0 != headerSalts }) ?? true {
            salts = headerSalts
            offset = 32
        }
        try? handle.seek(toOffset: UInt64(offset))
        guard let data = try? handle.readToEnd() else { return }
        var at = 0
        while at + 24 + pageSize <= data.count {
            let frameSalts = (Self.bigEndian(data, at: at + 8), Self.bigEndian(data, at: at + 12))
            guard frameSalts == headerSalts else { break }
            pages[Self.bigEndian(data, at: at), default: 0] += 1
            frames += 1
            at += 24 + pageSize
        }
        offset += at
    }

    /// The frames counted, by the B-tree each page belongs to (`dbstat` of the file as it is now), most first.
    func framesByBTree(databasePath: String) throws -> [(name: String, frames: Int)] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", "-readonly", databasePath, "SELECT pageno, name FROM dbstat"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var owner: [UInt32: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "|", maxSplits: 1)
            if parts.count == 2, let page = UInt32(parts[0]) { owner[page] = String(parts[1]) }
        }
        var byName: [String: Int] = [:]
        for (page, count) in pages {
            // Pages not in any B-tree now: the file's header page, freelist pages.
            byName[owner[page] ?? (page == 1 ? "file header (sqlite_schema)" : "free pages"), default: 0] += count
        }
        return byName.map { (name: $0.key, frames: $0.value) }.sorted { $0.frames > $1.frames }
    }

    /// Takes away frames counted earlier (another phase's).
    mutating func subtract(page: UInt32, count: Int) {
        pages[page, default: 0] -= count
    }

    private static func bigEndian(_ data: Data, at offset: Int) -> UInt32 {
        let start = data.startIndex + offset
        return data[start..<(start + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }
}

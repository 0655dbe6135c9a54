/// A tree's files found by key where they are, in the array the tree was built as: only each
/// key's position is kept, in a table of 4-byte slots (`PositionIndex`). A sync saving the
/// catalog held a `[FileKey: String]` of every file's path, and the copy adoption's check before
/// it a `Set<FileKey>`: about 25 MiB each at 100 000 files (a table of 262 144 slots of a
/// 72-byte key, and the joined paths), at the peak of a sync in which every item changed; the
/// transfer engine's catalog, a dictionary of whole files, about 250 bytes a file. The first
/// file of each key wins. Pure.
public struct TreeFileLookup: Sendable {
    public private(set) var files: [TreeFile]
    private var positions: PositionIndex

    public init(_ files: [TreeFile] = []) {
        self.files = files
        var positions = PositionIndex(capacity: files.count)
        for (i, file) in files.enumerated() {
            positions.insertFirst(i, hash: file.key.hashValue, sameKey: { files[$0].key == file.key }) { files[$0].key.hashValue }
        }
        self.positions = positions
    }

    private func position(of key: FileKey) -> Int? {
        positions.find(hash: key.hashValue) { files[$0].key == key }
    }

    public subscript(key: FileKey) -> TreeFile? { position(of: key).map { files[$0] } }

    public func contains(_ key: FileKey) -> Bool { position(of: key) != nil }

    /// A file whose size became known by fetching it to its end.
    public mutating func setSize(_ size: Int64, of key: FileKey) {
        guard let i = position(of: key) else { return }
        files[i].size = size
    }
}

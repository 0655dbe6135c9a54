import LabstreamCore

/// The catalog's files by key, for the transfer engine. The files stay in the array the tree was
/// built from (shared, not copied); only each key's position is kept beside them, in a table of
/// 4-byte slots: a dictionary of whole files cost about 250 bytes a file at 100 000 files, and a
/// dictionary of keys to positions still 140.
struct CatalogFiles: Sendable {
    private var files: [TreeFile] = []
    private var positions = PositionIndex()

    init() {}

    /// The first file of each key wins, as the tree's does.
    init(_ files: [TreeFile]) {
        self.files = files
        positions = PositionIndex(capacity: files.count)
        for (i, file) in files.enumerated() {
            positions.insertFirst(i, hash: file.key.hashValue, sameKey: { files[$0].key == file.key }) { files[$0].key.hashValue }
        }
    }

    private func position(of key: FileKey) -> Int? {
        positions.find(hash: key.hashValue) { files[$0].key == key }
    }

    subscript(key: FileKey) -> TreeFile? { position(of: key).map { files[$0] } }

    /// A file whose size became known by fetching it to its end.
    mutating func setSize(_ size: Int64, of key: FileKey) {
        guard let i = position(of: key) else { return }
        files[i].size = size
    }
}

import LabstreamCore

/// The catalog's files by key, for the transfer engine. The files stay in the array the tree was
/// built from (shared, not copied); only each key's position is kept beside them: a dictionary
/// of whole files cost about 250 bytes a file at 100 000 files.
struct CatalogFiles: Sendable {
    private var files: [TreeFile] = []
    private var position: [FileKey: Int32] = [:]

    init() {}

    /// The first file of each key wins, as the tree's does.
    init(_ files: [TreeFile]) {
        self.files = files
        position.reserveCapacity(files.count)
        for (i, file) in files.enumerated() where position[file.key] == nil { position[file.key] = Int32(i) }
    }

    subscript(key: FileKey) -> TreeFile? { position[key].map { files[Int($0)] } }

    /// A file whose size became known by fetching it to its end.
    mutating func setSize(_ size: Int64, of key: FileKey) {
        guard let i = position[key] else { return }
        files[Int(i)].size = size
    }
}

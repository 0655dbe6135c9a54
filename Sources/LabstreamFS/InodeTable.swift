import LabstreamCore

/// The mounted tree as inodes. Built from the catalog's tree files; inode numbers stay the
/// same for the same path across rebuilds so the kernel's caches stay valid.
///
/// Kept small because a household's library is hundreds of thousands of nodes: a node is a
/// few words (its file lives once in `files` or `generated`, its children are a sorted list of
/// numbers), not a value holding its whole tree file and a dictionary of its children; the
/// latter cost about 1.2 KiB per film at 100 000 films, most of it the table's buckets.
public struct InodeTable: Sendable {
    public static let rootIno: UInt64 = 1

    public enum Kind: Sendable, Hashable {
        case directory
        case file(TreeFile)
        /// A file Labstream makes itself (an `.nfo`, a stored side asset).
        case generated(GeneratedFile)
    }

    /// A node as the filesystem sees it (made when asked for).
    public struct Node: Sendable, Hashable {
        public var ino: UInt64
        public var parent: UInt64
        public var name: String
        public var kind: Kind
        public var mtime: Int64
        /// How many names the directory holds (0 for a file).
        public var childCount: Int

        public var isDirectory: Bool { if case .directory = kind { return true }; return false }
        public var file: TreeFile? { if case .file(let f) = kind { return f }; return nil }
        public var generated: GeneratedFile? { if case .generated(let g) = kind { return g }; return nil }
    }

    enum Payload: Sendable, Hashable {
        /// Children's numbers, sorted by name once the table is built.
        case directory([UInt64])
        case file(Int32)
        case generated(Int32)
    }

    struct Stored: Sendable, Hashable {
        var parent: UInt64
        var name: String
        var mtime: Int64
        var payload: Payload
    }

    private var nodes: [UInt64: Stored] = [:]
    private var files: [TreeFile] = []
    private var generatedFiles: [GeneratedFile] = []
    /// The paths ("a/b/c") whose hash another path had first, and the number each got instead,
    /// kept across rebuilds; every other path's number is its hash, so nothing else is kept
    /// per path (a table of every path cost a library of 100 000 files tens of MiB).
    var bumped: [String: UInt64] = [:]
    var bumpedNumbers: Set<UInt64> = []
    /// Catalog files in the tree, counted as they go in: `statfs` asks it of every walk
    /// (find(1) does), and counting 100 000 nodes then took half a second.
    public private(set) var fileCount = 0

    /// `generated` files go in after the media, so a name a media file has stays the media's.
    public init(files: [TreeFile] = [], generated: [GeneratedFile] = [], previous: InodeTable? = nil) {
        if let previous {
            bumped = previous.bumped
            bumpedNumbers = previous.bumpedNumbers
        }
        nodes.reserveCapacity(files.count * 2 + generated.count + 1)
        nodes[Self.rootIno] = Stored(parent: Self.rootIno, name: "", mtime: 0, payload: .directory([]))
        // The arrays as given (shared with the caller, not copied); a file whose name was taken
        // stays in them unreferenced.
        self.files = files
        generatedFiles = generated
        for (i, file) in files.enumerated() where insert(file.path, modified: file.modified, payload: .file(Int32(i))) { fileCount += 1 }
        for (i, file) in generated.enumerated() { _ = insert(file.path, modified: file.modified, payload: .generated(Int32(i))) }
        sortChildren()
    }

    /// A path's inode is a hash of the path, so the same path has the same number after a restart:
    /// an NFS client's file handles (which name inodes) stay valid across one. Two paths with one
    /// hash (about one chance in 10^9 at 100 000 paths) give the later one the next free number,
    /// which it keeps while the daemon runs.
    mutating func ino(for path: String) -> UInt64 {
        if let kept = bumped[path] { return kept }
        var ino = Self.stableIno(path)
        guard nodes[ino] != nil || bumpedNumbers.contains(ino) else { return ino }
        while nodes[ino] != nil || bumpedNumbers.contains(ino) { ino = ino == Self.maxIno ? Self.rootIno + 1 : ino + 1 }
        bumped[path] = ino
        bumpedNumbers.insert(ino)
        return ino
    }

    /// The number `path` (whose parent is `parent`, last component `name`) already has in this
    /// table, if it is in it.
    func existing(_ path: String, parent: UInt64, name: String) -> UInt64? {
        let ino = bumped[path] ?? Self.stableIno(path)
        guard let node = nodes[ino], node.parent == parent, node.name == name else { return nil }
        return ino
    }

    /// Every path's number (for tests: it walks the whole table).
    public var inodeOfPath: [String: UInt64] {
        Dictionary(nodes.keys.filter { $0 != Self.rootIno }.map { (path(of: $0), $0) }, uniquingKeysWith: { a, _ in a })
    }

    static let maxIno = UInt64(Int64.max)

    /// FNV-1a (64-bit) of the path's UTF-8 bytes, folded into 2...Int64.max (above the root,
    /// and positive for any reader that takes st_ino as signed).
    public static func stableIno(_ path: String) -> UInt64 {
        FNV1a.hash(path.utf8) % (maxIno - rootIno) + rootIno + 1
    }

    /// Whether the file went in (a name the builder should have kept unique may already be taken).
    mutating func insert(_ components: [String], modified: Int64, payload: Payload) -> Bool {
        var parent = Self.rootIno
        var path = ""
        for (i, component) in components.enumerated() {
            path += (path.isEmpty ? "" : "/") + component
            let last = i == components.count - 1
            if let existing = existing(path, parent: parent, name: component) {
                guard !last, case .directory = nodes[existing]!.payload else { return false }
                nodes[existing]!.mtime = max(nodes[existing]!.mtime, modified)
                parent = existing
                continue
            }
            let ino = ino(for: path)
            nodes[ino] = Stored(parent: parent, name: component, mtime: modified, payload: last ? payload : .directory([]))
            guard case .directory(var children) = nodes[parent]!.payload else { return false }
            nodes[parent]!.payload = .directory([])   // the array stays uniquely referenced while it grows
            children.append(ino)
            nodes[parent]!.payload = .directory(children)
            parent = ino
        }
        nodes[Self.rootIno]!.mtime = max(nodes[Self.rootIno]!.mtime, modified)
        return true
    }

    mutating func sortChildren() {
        for (ino, node) in nodes {
            guard case .directory(let children) = node.payload, children.count > 1 else { continue }
            let sorted = children.map { (nodes[$0]!.name, $0) }.sorted { $0.0 < $1.0 }.map(\.1)
            nodes[ino]!.payload = .directory(sorted)
        }
    }

    public func node(_ ino: UInt64) -> Node? {
        guard let s = nodes[ino] else { return nil }
        let kind: Kind, count: Int
        switch s.payload {
        case .directory(let children): (kind, count) = (.directory, children.count)
        case .file(let i): (kind, count) = (.file(files[Int(i)]), 0)
        case .generated(let i): (kind, count) = (.generated(generatedFiles[Int(i)]), 0)
        }
        return Node(ino: ino, parent: s.parent, name: s.name, kind: kind, mtime: s.mtime, childCount: count)
    }

    public func isDirectory(_ ino: UInt64) -> Bool {
        if case .directory = nodes[ino]?.payload { return true }
        return false
    }

    /// The names in directory `ino` with their numbers, sorted by name (none for a file).
    public func children(of ino: UInt64) -> [(name: String, ino: UInt64)] {
        guard case .directory(let children) = nodes[ino]?.payload else { return [] }
        return children.map { (nodes[$0]!.name, $0) }
    }

    /// Every directory's number.
    public var directories: [UInt64] {
        nodes.compactMap { ino, node in if case .directory = node.payload { return ino }; return nil }
    }

    /// Every node's number.
    public var inodes: [UInt64] { Array(nodes.keys) }

    public func lookup(_ parent: UInt64, _ name: String) -> Node? {
        guard case .directory(let children) = nodes[parent]?.payload else { return nil }
        // Sorted by name: a binary search (a folder may hold 90 000 films).
        var low = 0, high = children.count
        while low < high {
            let mid = (low + high) / 2
            if nodes[children[mid]]!.name < name { low = mid + 1 } else { high = mid }
        }
        guard low < children.count, nodes[children[low]]!.name == name else { return nil }
        return node(children[low])
    }

    /// The node at `components` below the root.
    public func resolve(_ components: [String]) -> Node? {
        var node = node(Self.rootIno)
        for c in components where !c.isEmpty && c != "." {
            node = node.flatMap { lookup($0.ino, c) }
        }
        return node
    }

    /// Every file at or below `ino`.
    public func files(under ino: UInt64) -> [TreeFile] {
        guard let node = nodes[ino] else { return [] }
        switch node.payload {
        case .file(let i): return [files[Int(i)]]
        case .generated: return []
        case .directory(let children): return children.sorted().flatMap { files(under: $0) }
        }
    }

    public func path(of ino: UInt64) -> String {
        var parts: [String] = []
        var cur = ino
        while cur != Self.rootIno, let n = nodes[cur] {
            parts.append(n.name)
            cur = n.parent
        }
        return parts.reversed().joined(separator: "/")
    }
}

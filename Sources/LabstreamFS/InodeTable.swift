import LabstreamCore

/// The mounted tree as inodes. Built from the catalog's tree files; inode numbers stay the
/// same for the same path across rebuilds so the kernel's caches stay valid.
///
/// Kept small because a household's library is hundreds of thousands of nodes: a node is 40
/// bytes in an array (its file lives once in `files` or `generated`, its children are a run of
/// positions in one shared list), found by number through 4-byte slots. A value holding its
/// whole tree file and a dictionary of children cost about 1.2 KiB per film at 100 000 films;
/// a dictionary of numbers to nodes with a child array each still about 300 bytes.
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

    /// What a node is: a folder (its children are a run of `childList`), or a file at a
    /// position in `files` or `generatedFiles`.
    enum What: UInt8, Sendable, Hashable { case directory, file, generated }

    /// A node in 40 bytes. Nodes are found by position (in `stored`, `inos`); `positions` finds
    /// a number's.
    struct Stored: Sendable, Hashable {
        var name: String
        var mtime: Int64
        var parent: Int32
        /// A folder: its first child in `childList`; a file: its position in its array.
        var first: Int32
        /// A folder: how many names it holds.
        var count: Int32
        var what: What
    }

    private var inos: [UInt64] = []
    private var stored: [Stored] = []
    private var positions = PositionIndex()
    /// Every folder's children, each folder's a run sorted by name.
    private var childList: [Int32] = []
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
        let expected = files.count * 2 + generated.count + 1
        inos.reserveCapacity(expected)
        stored.reserveCapacity(expected)
        positions = PositionIndex(capacity: expected)
        add(Self.rootIno, Stored(name: "", mtime: 0, parent: 0, first: 0, count: 0, what: .directory))
        // The arrays as given (shared with the caller, not copied); a file whose name was taken
        // stays in them unreferenced.
        self.files = files
        generatedFiles = generated
        var chain: [Folder] = []
        for (i, file) in files.enumerated() where insert(file.path, modified: file.modified, what: .file, at: i, after: &chain) { fileCount += 1 }
        chain = []
        for (i, file) in generated.enumerated() { _ = insert(file.path, modified: file.modified, what: .generated, at: i, after: &chain) }
        layOutChildren()
    }

    private static func slot(_ ino: UInt64) -> Int { Int(truncatingIfNeeded: ino ^ (ino >> 32)) }

    private func position(of ino: UInt64) -> Int? {
        positions.find(hash: Self.slot(ino)) { inos[$0] == ino }
    }

    private mutating func add(_ ino: UInt64, _ node: Stored) {
        inos.append(ino)
        stored.append(node)
        let known = inos
        positions.insert(known.count - 1, hash: Self.slot(ino)) { Self.slot(known[$0]) }
    }

    /// A path's inode is a hash of the path, so the same path has the same number after a restart:
    /// an NFS client's file handles (which name inodes) stay valid across one. Two paths with one
    /// hash (about one chance in 10^9 at 100 000 paths) give the later one the next free number,
    /// which it keeps while the daemon runs.
    /// `hash`: the path's FNV-1a; `path` writes it out, which only a bumped number needs.
    mutating func ino(hash: UInt64, path: () -> String) -> UInt64 {
        if !bumped.isEmpty, let kept = bumped[path()] { return kept }
        var ino = Self.stableIno(hash: hash)
        guard position(of: ino) != nil || bumpedNumbers.contains(ino) else { return ino }
        while position(of: ino) != nil || bumpedNumbers.contains(ino) { ino = ino == Self.maxIno ? Self.rootIno + 1 : ino + 1 }
        bumped[path()] = ino
        bumpedNumbers.insert(ino)
        return ino
    }

    /// The position of the path whose FNV-1a is `hash` (its parent at `parent`, its last
    /// component `name`) in this table, if it is in it.
    func existing(hash: UInt64, path: () -> String, parent: Int, name: String) -> Int? {
        let ino = bumped.isEmpty ? Self.stableIno(hash: hash) : bumped[path()] ?? Self.stableIno(hash: hash)
        guard let p = position(of: ino), stored[p].parent == Int32(parent), stored[p].name == name else { return nil }
        return p
    }

    /// Every path's number (for tests: it walks the whole table).
    public var inodeOfPath: [String: UInt64] {
        Dictionary(inos.dropFirst().map { (path(of: $0), $0) }, uniquingKeysWith: { a, _ in a })
    }

    static let maxIno = UInt64(Int64.max)

    /// FNV-1a (64-bit) of the path's UTF-8 bytes, folded into 2...Int64.max (above the root,
    /// and positive for any reader that takes st_ino as signed).
    public static func stableIno(_ path: String) -> UInt64 { stableIno(hash: FNV1a.hash(path.utf8)) }

    static func stableIno(hash: UInt64) -> UInt64 { hash % (maxIno - rootIno) + rootIno + 1 }

    /// A folder on the path inserted last: its name, position and its path's FNV-1a.
    struct Folder {
        var name: String
        var position: Int
        var hash: UInt64
    }

    /// Whether the file went in (a name the builder should have kept unique may already be taken).
    /// `chain`: the folders of the path inserted before, root first, which this one's replace.
    /// Paths come in path order, so most of their folders are the previous path's: those are
    /// taken from it instead of found again by a hash of each prefix of the path (at 100 000
    /// files that was most of the build).
    mutating func insert(_ components: [String], modified: Int64, what: What, at index: Int, after chain: inout [Folder]) -> Bool {
        var parent = 0
        var hash = FNV1a.offsetBasis
        var depth = 0
        while depth < components.count - 1, depth < chain.count, chain[depth].name == components[depth] {
            parent = chain[depth].position
            hash = chain[depth].hash
            stored[parent].mtime = max(stored[parent].mtime, modified)
            depth += 1
        }
        chain.removeSubrange(depth...)
        for (i, component) in components.enumerated().dropFirst(depth) {
            // The path's hash goes on from its folder's: the path itself is written out only
            // for a number bumped by a collision.
            if i > 0 { hash = FNV1a.hash(CollectionOfOne(UInt8(ascii: "/")), continuing: hash) }
            hash = FNV1a.hash(component.utf8, continuing: hash)
            let path = { components[...i].joined(separator: "/") }
            let last = i == components.count - 1
            if let existing = existing(hash: hash, path: path, parent: parent, name: component) {
                guard !last, stored[existing].what == .directory else { return false }
                stored[existing].mtime = max(stored[existing].mtime, modified)
                parent = existing
                chain.append(Folder(name: component, position: parent, hash: hash))
                continue
            }
            guard stored[parent].what == .directory else { return false }
            add(
                ino(hash: hash, path: path),
                Stored(
                    name: component, mtime: modified, parent: Int32(parent), first: last ? Int32(index) : 0, count: 0,
                    what: last ? what : .directory))
            stored[parent].count += 1
            parent = stored.count - 1
            if !last { chain.append(Folder(name: component, position: parent, hash: hash)) }
        }
        stored[0].mtime = max(stored[0].mtime, modified)
        return true
    }

    /// Each folder's children as one run of `childList`, sorted by name (a folder may hold
    /// 90 000 films: names are found by binary search).
    mutating func layOutChildren() {
        var next = [Int32](repeating: 0, count: stored.count)
        var total: Int32 = 0
        for p in stored.indices where stored[p].what == .directory {
            stored[p].first = total
            next[p] = total
            total += stored[p].count
        }
        var list = [Int32](repeating: 0, count: Int(total))
        for p in stored.indices.dropFirst() {
            let parent = Int(stored[p].parent)
            list[Int(next[parent])] = Int32(p)
            next[parent] += 1
        }
        let nodes = stored
        for node in nodes where node.what == .directory && node.count > 1 {
            list[Int(node.first)..<Int(node.first + node.count)].sort { nodes[Int($0)].name < nodes[Int($1)].name }
        }
        childList = list
    }

    private func node(at p: Int) -> Node {
        let s = stored[p]
        let kind: Kind, count: Int
        switch s.what {
        case .directory: (kind, count) = (.directory, Int(s.count))
        case .file: (kind, count) = (.file(files[Int(s.first)]), 0)
        case .generated: (kind, count) = (.generated(generatedFiles[Int(s.first)]), 0)
        }
        return Node(ino: inos[p], parent: inos[Int(s.parent)], name: s.name, kind: kind, mtime: s.mtime, childCount: count)
    }

    public func node(_ ino: UInt64) -> Node? { position(of: ino).map(node(at:)) }

    public func isDirectory(_ ino: UInt64) -> Bool { position(of: ino).map { stored[$0].what == .directory } ?? false }

    /// The positions of directory `p`'s children, sorted by name (none for a file).
    private func childPositions(_ p: Int) -> ArraySlice<Int32> {
        let s = stored[p]
        guard s.what == .directory else { return [] }
        return childList[Int(s.first)..<Int(s.first + s.count)]
    }

    /// The names in directory `ino` with their numbers, sorted by name (none for a file).
    public func children(of ino: UInt64) -> [(name: String, ino: UInt64, isDirectory: Bool)] {
        guard let p = position(of: ino) else { return [] }
        return childPositions(p).map { (stored[Int($0)].name, inos[Int($0)], stored[Int($0)].what == .directory) }
    }

    /// Every directory's number.
    public var directories: [UInt64] { stored.indices.filter { stored[$0].what == .directory }.map { inos[$0] } }

    /// Every node's number.
    public var inodes: [UInt64] { inos }

    public func lookup(_ parent: UInt64, _ name: String) -> Node? {
        guard let p = position(of: parent) else { return nil }
        let children = childPositions(p)
        var low = children.startIndex, high = children.endIndex
        while low < high {
            let mid = (low + high) / 2
            if stored[Int(children[mid])].name < name { low = mid + 1 } else { high = mid }
        }
        guard low < children.endIndex, stored[Int(children[low])].name == name else { return nil }
        return node(at: Int(children[low]))
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
        guard let p = position(of: ino) else { return [] }
        return files(at: p)
    }

    private func files(at p: Int) -> [TreeFile] {
        switch stored[p].what {
        case .file: return [files[Int(stored[p].first)]]
        case .generated: return []
        case .directory: return childPositions(p).sorted { inos[Int($0)] < inos[Int($1)] }.flatMap { files(at: Int($0)) }
        }
    }

    public func path(of ino: UInt64) -> String {
        guard var p = position(of: ino) else { return "" }
        var parts: [String] = []
        while p != 0 {
            parts.append(stored[p].name)
            p = Int(stored[p].parent)
        }
        return parts.reversed().joined(separator: "/")
    }
}

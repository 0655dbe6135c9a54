import LabstreamCore

/// The mounted tree as inodes. Built from the catalog's tree files; inode numbers stay the
/// same for the same path across rebuilds so the kernel's caches stay valid.
public struct InodeTable: Sendable {
    public static let rootIno: UInt64 = 1

    public enum Kind: Sendable, Hashable {
        case directory
        case file(TreeFile)
        /// A file Labstream makes itself (an `.nfo`): its bytes are here, always.
        case generated(GeneratedFile)
    }

    public struct Node: Sendable, Hashable {
        public var ino: UInt64
        public var parent: UInt64
        public var name: String
        public var kind: Kind
        public var mtime: Int64
        /// Sorted child names → inode, for directories.
        public var children: [String: UInt64] = [:]

        public var isDirectory: Bool { if case .directory = kind { return true }; return false }
        public var file: TreeFile? { if case .file(let f) = kind { return f }; return nil }
        public var generated: GeneratedFile? { if case .generated(let g) = kind { return g }; return nil }
    }

    public private(set) var nodes: [UInt64: Node] = [:]
    /// Catalog files in the tree, counted as they go in: `statfs` asks it of every walk
    /// (find(1) does), and counting 100 000 nodes then took half a second.
    public private(set) var fileCount = 0
    /// The paths ("a/b/c") whose hash another path had first, and the number each got instead,
    /// kept across rebuilds; every other path's number is its hash, so nothing else is kept
    /// per path (a table of every path cost a library of 100 000 files tens of MiB).
    var bumped: [String: UInt64] = [:]
    var bumpedNumbers: Set<UInt64> = []

    /// `generated` files go in after the media, so a name a media file has stays the media's.
    public init(files: [TreeFile] = [], generated: [GeneratedFile] = [], previous: InodeTable? = nil) {
        if let previous {
            bumped = previous.bumped
            bumpedNumbers = previous.bumpedNumbers
        }
        nodes[Self.rootIno] = Node(ino: Self.rootIno, parent: Self.rootIno, name: "", kind: .directory, mtime: 0)
        for file in files { insert(file.path, .file(file), modified: file.modified) }
        for file in generated { insert(file.path, .generated(file), modified: file.modified) }
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

    mutating func insert(_ components: [String], _ kind: Kind, modified: Int64) {
        var parent = Self.rootIno
        var path = ""
        for (i, component) in components.enumerated() {
            path += (path.isEmpty ? "" : "/") + component
            let last = i == components.count - 1
            if let existing = nodes[parent]!.children[component] {
                guard !last, nodes[existing]!.isDirectory else { return } // a name clash the builder should have prevented
                nodes[existing]!.mtime = max(nodes[existing]!.mtime, modified)
                parent = existing
                continue
            }
            let ino = ino(for: path)
            if last, case .file = kind { fileCount += 1 }
            nodes[ino] = Node(ino: ino, parent: parent, name: component, kind: last ? kind : .directory, mtime: modified)
            nodes[parent]!.children[component] = ino
            parent = ino
        }
        nodes[Self.rootIno]!.mtime = max(nodes[Self.rootIno]!.mtime, modified)
    }

    public func node(_ ino: UInt64) -> Node? { nodes[ino] }

    public func lookup(_ parent: UInt64, _ name: String) -> Node? {
        nodes[parent]?.children[name].flatMap { nodes[$0] }
    }

    /// The node at `components` below the root.
    public func resolve(_ components: [String]) -> Node? {
        var node = nodes[Self.rootIno]
        for c in components where !c.isEmpty && c != "." {
            node = node.flatMap { lookup($0.ino, c) }
        }
        return node
    }

    /// Every file at or below `ino`.
    public func files(under ino: UInt64) -> [TreeFile] {
        guard let node = nodes[ino] else { return [] }
        if let f = node.file { return [f] }
        return node.children.values.sorted().flatMap { files(under: $0) }
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

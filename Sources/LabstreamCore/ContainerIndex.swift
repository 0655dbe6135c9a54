/// Where a container keeps its index, from its first bytes: the part a player reads right after
/// the header and before the first frames.
public enum ContainerIndex {
    /// The index region of a file of `total` bytes whose first bytes are `header`; nil when the
    /// header says none (or the container is neither MP4 nor Matroska).
    public static func locate(header: [UInt8], total: Int64) -> ByteRange? {
        switch ContainerSniff.fileExtension(ofHeader: Array(header.prefix(ContainerSniff.headerLength))) {
        case "mp4", "mov": return mp4(header, total: total)
        case "mkv": return matroska(header, total: total)
        default: return nil
        }
    }

    /// The `moov` box: found among the top-level boxes in the header, or the box right after an
    /// `mdat` that runs past the header (where encoders write it when they do not move it first).
    static func mp4(_ b: [UInt8], total: Int64) -> ByteRange? {
        var offset: Int64 = 0
        while offset + 8 <= Int64(b.count) {
            let at = Int(offset)
            var size = Int64(be(b, at, 4))
            let type = String(decoding: b[at + 4..<at + 8], as: UTF8.self)
            if size == 1 {
                guard at + 16 <= b.count else { return nil }
                size = Int64(clamping: be(b, at + 8, 8))
            } else if size == 0 {
                size = total - offset
            }
            guard size >= 8, offset + size <= total else { return nil }
            if type == "moov" { return ByteRange(offset, offset + size) }
            if type == "mdat" && offset + size > Int64(b.count) {
                return offset + size < total ? ByteRange(offset + size, total) : nil
            }
            offset += size
        }
        return nil
    }

    /// The Cues, where the Segment's SeekHead says they start, to the end of the file (their
    /// length is their own element's, which is not read yet; the caller caps the range).
    static func matroska(_ b: [UInt8], total: Int64) -> ByteRange? {
        var r = EBMLReader(bytes: b)
        guard let ebml = r.element(), ebml.id == 0x1A45_DFA3, r.skip(ebml.size) else { return nil }
        guard let segment = r.element(), segment.id == 0x1853_8067 else { return nil }
        let segmentStart = Int64(r.offset)
        while let child = r.element() {
            switch child.id {
            case 0x114D_9B74:  // SeekHead
                guard let size = child.size else { return nil }
                let end = r.offset + Int(size)
                while r.offset < end, let seek = r.element(), seek.id == 0x4DBB, let seekSize = seek.size {
                    let seekEnd = r.offset + Int(seekSize)
                    var id: [UInt8] = []
                    var position: Int64?
                    while r.offset < seekEnd, let field = r.element(), let fieldSize = field.size, r.offset + Int(fieldSize) <= b.count {
                        let bytes = Array(b[r.offset..<r.offset + Int(fieldSize)])
                        if field.id == 0x53AB { id = bytes }
                        if field.id == 0x53AC { position = bytes.reduce(0) { $0 << 8 | Int64($1) } }
                        r.offset += Int(fieldSize)
                    }
                    if id == [0x1C, 0x53, 0xBB, 0x6B], let position, segmentStart + position < total {
                        return ByteRange(segmentStart + position, total)
                    }
                    r.offset = seekEnd
                }
                return nil
            case 0x1F43_B675:  // a Cluster: the SeekHead comes before any
                return nil
            default:
                guard r.skip(child.size) else { return nil }
            }
        }
        return nil
    }

    static func be(_ b: [UInt8], _ at: Int, _ count: Int) -> UInt64 {
        b[at..<at + count].reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// Reads EBML element heads (an id, kept with its length marker, and a size; nil for an unknown
/// size) from a buffer; nil past its end.
struct EBMLReader {
    let bytes: [UInt8]
    var offset = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func element() -> (id: UInt32, size: Int64?)? {
        guard let (id, _) = vint(keepMarker: true), let (size, allOnes) = vint(keepMarker: false) else { return nil }
        return (UInt32(truncatingIfNeeded: id), allOnes ? nil : Int64(size))
    }

    /// Moves past `size` bytes; false for an unknown size or one past the buffer.
    mutating func skip(_ size: Int64?) -> Bool {
        guard let size, size <= Int64(bytes.count - offset) else { return false }
        offset += Int(size)
        return true
    }

    private mutating func vint(keepMarker: Bool) -> (UInt64, allOnes: Bool)? {
        guard offset < bytes.count else { return nil }
        let first = bytes[offset]
        guard first != 0 else { return nil }
        let length = first.leadingZeroBitCount + 1
        guard offset + length <= bytes.count else { return nil }
        let marker: UInt8 = 0x80 >> (length - 1)
        var value = UInt64(keepMarker ? first : first & (marker - 1))
        var ones = first & (marker - 1) == marker - 1
        for i in 1..<length {
            value = value << 8 | UInt64(bytes[offset + i])
            ones = ones && bytes[offset + i] == 0xFF
        }
        offset += length
        return (value, ones)
    }
}

/// The container a file actually is, from its first bytes: a server-made copy is named by what
/// arrived, not by what was asked for (Plex answers an MP4 to a request for Matroska).
public enum ContainerSniff {
    /// Bytes `fileExtension` needs to look at.
    public static let headerLength = 16

    /// `mkv`, `mp4`, `mov`, `avi` or `ts`; nil when the bytes are none of these.
    public static func fileExtension(ofHeader b: [UInt8]) -> String? {
        if b.count >= 4 && b[0] == 0x1A && b[1] == 0x45 && b[2] == 0xDF && b[3] == 0xA3 { return "mkv" }  // EBML
        if b.count >= 12 && Array(b[4..<8]) == Array("ftyp".utf8) {
            return Array(b[8..<12]) == Array("qt  ".utf8) ? "mov" : "mp4"
        }
        if b.count >= 12 && Array(b[0..<4]) == Array("RIFF".utf8) && Array(b[8..<12]) == Array("AVI ".utf8) { return "avi" }
        if b.count >= 1 && b[0] == 0x47 { return "ts" }  // an MPEG-TS sync byte (a copy is never anything else starting so)
        return nil
    }

    /// `jpg`, `png`, `gif`, `webp`, `bmp`, `tif` or `heic` from an image's first bytes; nil when
    /// they are none of these.
    public static func imageExtension(ofHeader b: [UInt8]) -> String? {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool { b.count >= offset + bytes.count && Array(b[offset..<offset + bytes.count]) == bytes }
        if starts([0xFF, 0xD8, 0xFF]) { return "jpg" }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "png" }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return "gif" }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return "webp" }
        if starts(Array("BM".utf8)) { return "bmp" }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return "tif" }
        if starts(Array("ftyp".utf8), at: 4) && (starts(Array("heic".utf8), at: 8) || starts(Array("heix".utf8), at: 8) || starts(Array("mif1".utf8), at: 8)) {
            return "heic"
        }
        return nil
    }
}

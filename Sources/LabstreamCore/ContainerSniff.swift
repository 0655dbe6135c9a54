/// The container a file actually is, from its first bytes: a server-made copy is named by what
/// arrived, not by what was asked for (Plex answers an MP4 to a request for Matroska).
public enum ContainerSniff {
    /// Bytes `fileExtension` needs to look at.
    public static let headerLength = 16

    /// `mkv`, `mp4`, `mov`, `avi` or `ts`; nil when the bytes are none of these.
    public static func fileExtension(ofHeader b: [UInt8]) -> String? {
        if b.count >= 4 && b[0] == 0x1A && b[1] == 0x45 && b[2] == 0xDF && b[3] == 0xA3 { return "mkv" }   // EBML
        if b.count >= 12 && Array(b[4..<8]) == Array("ftyp".utf8) {
            return Array(b[8..<12]) == Array("qt  ".utf8) ? "mov" : "mp4"
        }
        if b.count >= 12 && Array(b[0..<4]) == Array("RIFF".utf8) && Array(b[8..<12]) == Array("AVI ".utf8) { return "avi" }
        if b.count >= 1 && b[0] == 0x47 { return "ts" }   // an MPEG-TS sync byte (a copy is never anything else starting so)
        return nil
    }
}

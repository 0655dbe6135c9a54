import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// The read behind `AdoptionProbe`: a stored copy confirmed by its bytes as `file`'s, for a copy
/// kept across a rebuilt library (the daemon's `CopyAdoption`) and one shared with another
/// server's file (`SharedCopies`).
public enum CopyProbe {
    /// The few ranges `AdoptionProbe` plans, read from `file`'s server and compared with the
    /// stored copy's digests and with its bytes in `partial` (its absolute path): whether they
    /// confirm it (anything that differs or fails does not), and the validator the server's
    /// answers carried.
    public static func confirm(
        _ stored: DownloadRow, as file: TreeFile, partial: String, backend: any MediaBackend, index: OfflineIndex
    ) -> (agrees: Bool, validator: Validator?) {
        guard stored.total == file.size, let segments = try? index.segments(stored.key, attempt: stored.attempt).map({ (range: $0.range, digest: $0.digest) }),
            let checks = AdoptionProbe.plan(size: stored.total, segments: segments)
        else { return (false, nil) }
        let local = open(partial, O_RDONLY | O_CLOEXEC)
        guard local >= 0 else { return (false, nil) }
        defer { close(local) }
        var read: [ByteRange: (count: Int64, digest: String)] = [:]
        var bytesHere: [ByteRange: String] = [:]
        var validators: Set<String> = []
        var validator: Validator?
        for check in checks {
            let like = AdoptionProbe.digestLike(check, segments: segments)
            var request = backend.rangeRequest(for: file, range: check.range, validator: nil)
            request.bodyLimit = Int(check.range.count)
            guard let answer = try? backend.transport.call(request), answer.status == 206 else { return (false, nil) }
            validator = Validator.from(etag: answer.header("etag"), lastModified: answer.header("last-modified"))
            validators.insert(validator?.description ?? "")
            read[check.range] = (Int64(answer.body.count), digest(answer.body, like: like))
            if check.digest == nil {
                var bytes = [UInt8](repeating: 0, count: Int(check.range.count))
                let n = bytes.withUnsafeMutableBytes { b in (try? preadFully(local, into: b, at: check.range.lower, context: partial)) ?? -1 }
                guard n == bytes.count else { return (false, nil) }
                bytesHere[check.range] = digest(bytes, like: like)
            }
        }
        return (AdoptionProbe.confirms(checks, read: read, stored: bytesHere, validators: validators), validator)
    }

    static func digest(_ bytes: [UInt8], like stored: String?) -> String {
        let hasher = SegmentDigest.hasher(like: stored)
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }
}

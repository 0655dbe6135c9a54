/// A server's record that this device holds a copy of a file (Silo's managed download entry,
/// downloads-api.md § 4 and § 5), as Labstream keeps it beside the file's download row. What to
/// do next with one is `ManagedEntryPolicy.step`; whether a finished copy matches the server's
/// integrity data is `IntegrityCheck.judge`. Pure values.
public struct ManagedEntry: Sendable, Hashable {
    /// The item (a film, an episode) and the file of it the entry holds (the server's id).
    public var itemId: String
    public var sourceId: String
    /// What of the file it holds: the original, or a copy at a preset (its own row,
    /// `DerivedCopy`); nil at a preset Labstream has no name for, whose copy is no row.
    public var kind: FileKind?
    /// The server's entry id; nil while a create was sent and its answer never arrived (the
    /// intent is recorded first, so a stop or a lost answer is followed by a look, not a second create).
    public var id: String?
    public var revision: Int
    /// The server's lifecycle state: `ready`, `preparing`, `downloading`, `completed`, `failed`, `revoked`.
    public var status: String
    /// `original`, `remux` or `transcode`: only an `original` entry serves the tree file's bytes.
    public var deliveryFormat: String
    /// What Labstream last told the server (`downloading`, `completed`), and when (the PATCH's
    /// `updated_at`, milliseconds since the epoch: each event is sent later than the one before,
    /// since the server ignores an event no newer than its last).
    public var reported: Report?
    public var reportedAt: Int64?
    /// The entry's offline manifest as the server sent it (no tokens: the docs promise no
    /// presigned URLs), kept once the copy was checked against it.
    public var manifest: [UInt8]?

    public enum Report: String, Sendable, Hashable {
        case downloading, completed
    }

    public init(
        itemId: String, sourceId: String, kind: FileKind? = .original, id: String?, revision: Int = 0, status: String = "", deliveryFormat: String = "original",
        reported: Report? = nil, reportedAt: Int64? = nil, manifest: [UInt8]? = nil
    ) {
        self.itemId = itemId
        self.sourceId = sourceId
        self.kind = kind
        self.id = id
        self.revision = revision
        self.status = status
        self.deliveryFormat = deliveryFormat
        self.reported = reported
        self.reportedAt = reportedAt
        self.manifest = manifest
    }

    /// The entry no longer lets the device fetch (downloads-api.md § 5: revoked; a failed artifact job).
    public var endsFetching: Bool { ["revoked", "failed"].contains(status) }

    /// The file's bytes are fetched through this entry: it holds the original (an original
    /// that came back as a compatibility artifact does not), or it is a copy at a preset, whose
    /// bytes exist nowhere else. A revoked entry still routes them, so the server's refusal is
    /// what a fetch meets (never a way around it).
    public var routesBytes: Bool { id != nil && (deliveryFormat == "original" || quality != .original) }

    /// The preset the entry was asked at (`original` for one Labstream has no name for).
    public var quality: Quality { kind?.quality ?? .original }

    /// The row of `server` whose copy this entry holds (none at a preset without a name).
    public func key(server: String) -> FileKey? { kind.map { FileKey(server: server, itemId: itemId, sourceId: sourceId, kind: $0) } }

    /// Whether this entry holds the copy of `key`'s row.
    public func holds(_ key: FileKey) -> Bool { key.itemId == itemId && key.sourceId == sourceId && key.kind == kind }

    /// Whether this entry's integrity data judges the finished copy of `key`.
    public func checks(_ key: FileKey) -> Bool { holds(key) && servesOriginal }

    /// Its file and manifest can be asked for (downloads-api.md § 4.5–4.6: a `preparing` artifact
    /// is not servable yet, and the manifest is fetched "when the entry reaches ready"; both
    /// answer `409` before, as for a revoked or failed entry).
    public var servable: Bool { id != nil && !endsFetching && status != "preparing" }

    /// Serves the source's own bytes now, so its manifest's integrity data (the source's) is theirs.
    public var servesOriginal: Bool { routesBytes && deliveryFormat == "original" && servable }

    /// What an entry at `preset` holds of its file: the original, or its copy at the preset.
    /// A preset Labstream has no name for holds a copy no row is (nil; never the original: its
    /// bytes are not the original's).
    public static func kind(preset: String) -> FileKind? {
        if preset.lowercased() == Quality.original.description { return .original }
        guard let quality = Quality(preset), quality != .original else { return nil }
        return .copy(quality)
    }
}

/// Where the local copy of a file with an entry stands, as the entry policy needs it.
public enum LocalCopy: Sendable, Hashable {
    /// Bytes are still missing.
    case fetching
    /// Every byte is here and the completion check has not judged it yet.
    case awaitingCheck
    /// Every byte is here and was judged playable (or could not be judged).
    case finished
    /// The completion check rejected it, or fetching stopped for good.
    case failed
}

public enum ManagedEntryPolicy {
    public enum Step: Sendable, Hashable {
        case none
        /// Record the intent, then create the entry (once; never replayed).
        case register
        /// A create's answer never came: list the server's entries and adopt this file's.
        case lookUp
        /// Tell the server where the copy stands.
        case report(ManagedEntry.Report)
        /// The file is no longer pinned: delete the entry (through the cleanup journal).
        case remove
        /// The server ended the entry: stop fetching, keep what is here, say why.
        case stop(StatusReason)
    }

    /// `besideStored`: what belongs beside the copy (its manifest's artwork and subtitles) is
    /// stored or was tried; `completed` waits for it (downloads-api.md § 3 step 7, § 11.4: only
    /// after the media file and the required assets are in durable storage).
    public static func step(pinned: Bool, local: LocalCopy?, entry: ManagedEntry?, besideStored: Bool = true) -> Step {
        // A copy that failed (its fetch, a refused create) is registered again once retried.
        guard let entry else { return pinned && local != .failed ? .register : .none }
        guard entry.id != nil else { return .lookUp }
        guard pinned else { return .remove }
        if entry.endsFetching {
            return local == .finished ? .none : .stop(whyEnded(entry.status))
        }
        switch local {
        case .finished?: return entry.reported == .completed || entry.status == "completed" || !besideStored ? .none : .report(.completed)
        case .fetching?: return entry.reported == nil && entry.status == "ready" ? .report(.downloading) : .none
        case .awaitingCheck?, .failed?, nil: return .none
        }
    }

    /// The stored entries after a full listing of the server's (`remote`): an intent whose
    /// create did reach the server adopts what it made, and one that did not is dropped (the
    /// file registers again); a known entry takes the server's state, a new id (replaced
    /// elsewhere) starts its reports over, and one the server no longer has is dropped. A
    /// server entry for a pinned item Labstream did not know of is adopted; one for an item not
    /// pinned is left alone (it is not Labstream's to delete).
    public static func reconcile(stored: [String: ManagedEntry], remote: [ManagedEntry], pinned: Set<String>) -> [String: ManagedEntry] {
        let theirs = Dictionary(remote.map { ($0.itemId, $0) }, uniquingKeysWith: { a, _ in a })
        var out: [String: ManagedEntry] = [:]
        for (item, mine) in stored {
            guard var server = theirs[item] else { continue }
            if mine.id == server.id {
                server.reported = mine.reported
                server.reportedAt = mine.reportedAt
                server.manifest = mine.manifest
            }
            out[item] = server
        }
        for (item, server) in theirs where out[item] == nil && pinned.contains(item) && stored[item] == nil {
            out[item] = server
        }
        return out
    }

    /// Why a pin at `wanted` (nil: the original) cannot be made on a server that keeps one
    /// entry per item and device, given what of the item is pinned already; nil when it can.
    public static func pinConflict(wanted: Quality?, originalPinned: Bool, pinnedCopies: [Quality]) -> String? {
        if wanted == .remux {
            return "Silo has no remux preset: pin the original, or at a bitrate (\(Quality.allowedCaps.map { "\($0)mbps" }.joined(separator: ", ")))"
        }
        let held = (originalPinned ? [Quality.original] : []) + pinnedCopies
        guard let other = held.first(where: { $0 != (wanted ?? .original) }) else { return nil }
        let which = other == .original ? "the original" : "its \(other) copy"
        return "Silo keeps one download of each film or episode per device, and this one's is \(which) (pinned): unpin it first"
    }

    public static func whyEnded(_ status: String) -> StatusReason { .entryEnded(revoked: status == "revoked") }
}

/// The server's integrity data for a copy (Silo's manifest `integrity`).
public struct Integrity: Sendable, Hashable {
    public var expectedBytes: Int64?
    /// `media_file_hash` as the server gave it: a SHA-256 of the served bytes, or the scanner's
    /// OpenSubtitles hash of the source (16 hex digits); anything else cannot be compared.
    public var hash: String?

    public init(expectedBytes: Int64?, hash: String?) {
        self.expectedBytes = expectedBytes
        self.hash = hash
    }
}

public enum IntegrityCheck {
    public enum Verdict: Sendable, Hashable {
        case matches
        /// Nothing to compare the hash with (the server gave none, or one of an unknown kind): the size was checked.
        case sizeOnly
        case mismatch(String)
    }

    /// The kinds of file hash Labstream can compute to compare with the server's.
    public enum HashKind: String, Sendable, Hashable {
        case sha256 = "SHA-256"
        /// The OpenSubtitles hash: size plus the little-endian 64-bit words of the first and last 64 KiB.
        case osHash = "OpenSubtitles hash"
    }

    /// The kind and normalised value of a hash the server gave; nil when it is neither.
    public static func parse(_ value: String?) -> (kind: HashKind, hex: String)? {
        guard var v = value?.lowercased() else { return nil }
        if v.hasPrefix("sha256:") { v.removeFirst("sha256:".count) }
        guard v.allSatisfy(\.isHexDigit) else { return nil }
        switch v.count {
        case 64: return (.sha256, v)
        case 16: return (.osHash, v)
        default: return nil
        }
    }

    /// `localBytes` and `localHash` (the copy's hash of the kind asked, lower-case hex; nil when
    /// it cannot be computed) against the server's data.
    public static func judge(_ integrity: Integrity, localBytes: Int64, localHash: (HashKind) -> String?) -> Verdict {
        if let expected = integrity.expectedBytes, expected != localBytes {
            return .mismatch("integrity check: the server expects \(expected) bytes, the local copy has \(localBytes)")
        }
        guard let (kind, expected) = parse(integrity.hash), let local = localHash(kind) else { return .sizeOnly }
        return local == expected
            ? .matches
            : .mismatch("integrity check: the server's \(kind.rawValue) is \(expected), the local copy's is \(local); the copy is kept for inspection")
    }

    /// The OpenSubtitles hash of a file of `size` bytes from its first and last 64 KiB; nil for
    /// a file under 128 KiB, which the hash does not cover.
    public static func osHash(size: Int64, head: [UInt8], tail: [UInt8]) -> String? {
        let chunk = 64 * 1024
        guard size >= Int64(2 * chunk), head.count >= chunk, tail.count >= chunk else { return nil }
        var sum = UInt64(bitPattern: size)
        for bytes in [head.prefix(chunk), tail.suffix(chunk)] {
            let base = bytes.startIndex
            for word in stride(from: 0, to: chunk, by: 8) {
                var value: UInt64 = 0
                for i in 0..<8 { value |= UInt64(bytes[base + word + i]) << (8 * UInt64(i)) }
                sum &+= value
            }
        }
        let hex = String(sum, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

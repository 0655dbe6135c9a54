import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Runs the completion check (size, then the libmpv probe) on files whose bytes are all
/// present, one at a time.
enum Validation {
    static func pass(_ engine: TransferEngine) {
        let pending = (try? engine.index.downloadsAwaitingValidation()) ?? []
        let catalog = engine.catalogFiles()
        for row in pending {
            guard let file = catalog[row.key] ?? engine.treeFile(for: row), let transfer = try? engine.transfer(for: file) else { continue }
            let path = engine.layout.absolute(row.partialPath)
            var st = stat()
            let outcome: ProbeOutcome
            if stat(path, &st) != 0 || Int64(st.st_size) != row.total {
                outcome = .failed("size check: the local file is not \(row.total) bytes")
            } else {
                let started = Date()
                outcome = ProbeVerdict.judge(PlaybackProbe.observe(path: path), expecting: file.kind.media)
                engine.log("probe of \(file.path.joined(separator: "/")): \(outcome) in \(Int(Date().timeIntervalSince(started) * 1000)) ms")
            }
            transfer.applyVerdict(outcome, attempt: row.attempt, engine: engine)
        }
    }
}

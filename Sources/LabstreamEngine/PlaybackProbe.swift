import Foundation
import LabstreamCore

/// Runs the playback probe in the `labstream-probe` helper beside the running executable: a
/// decoder that crashes on a hostile file takes only the helper down, and the daemon stays free
/// of libmpv and the libraries it brings (tens of MiB of resident memory). Blocks the calling
/// thread (the validation worker's, never Swift's cooperative pool).
public enum PlaybackProbe {
    /// The helper next to this executable (`/proc/self/exe`: `mount.labstream` and symlinks resolve).
    public static var helperPath: String {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("labstream-probe").path
    }

    /// `expecting` `.image`: the helper decodes one picture instead of playing.
    public static func observe(path: String, expecting: MediaKind = .video, timeout: Double = 10, helper: String = helperPath) -> ProbeObservation {
        var failed = ProbeObservation()
        guard FileManager.default.isExecutableFile(atPath: helper) else {
            failed.problem = "the playback probe helper \(helper) is missing; reinstall Labstream (make install puts it beside labstream)"
            return failed
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = [path, String(timeout)] + (expecting == .image ? ["image"] : [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch {
            failed.problem = "the playback probe helper \(helper) could not start: \(error.localizedDescription)"
            return failed
        }
        // mpv has its own deadline; this one is for a helper that hangs anyway.
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout + 15, execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        if process.terminationReason == .uncaughtSignal {
            failed.problem = "the playback probe crashed on this file (signal \(process.terminationStatus)); it is kept, playback not proven"
            return failed
        }
        guard process.terminationStatus == 0, let seen = try? JSONDecoder().decode(ProbeObservation.self, from: data) else {
            failed.problem = "the playback probe helper failed (exit \(process.terminationStatus)); playback not proven"
            return failed
        }
        return seen
    }
}

import Foundation
import LabstreamCore
import Testing

/// labstream.conf's `on_complete` / `on_failed` (issue 40 item 6): run by a mounted daemon with
/// the file's path, server, title, state and reason in the environment and never a token; a hook
/// that hangs is killed with its children and logged while another file's hook runs beside it;
/// one that fails is logged.
@Suite(.serialized) struct CompletionHookTests {
    /// A hook script that writes its environment to OUT/TITLE.env; for `hang`'s title it first
    /// says it started and then waits on a child that would sleep for ten minutes.
    static func hook(_ m: MountedLabstream, exit code: Int = 0, hang: String = "-") throws -> (script: String, out: String) {
        let out = m.scratch.sub("hook-out")
        let script = m.scratch.path + "/hook.sh"
        try """
        #!/bin/sh
        out="$1"
        if [ "$LABSTREAM_TITLE" = "\(hang)" ]; then
            sleep 600 &
            echo $! > "$out/sleep.pid"
            wait
        fi
        ls "$(dirname "$LABSTREAM_PATH")" > "$out/$LABSTREAM_TITLE.ls"
        env > "$out/$LABSTREAM_TITLE.tmp" && mv "$out/$LABSTREAM_TITLE.tmp" "$out/$LABSTREAM_TITLE.env"
        exit \(code)

        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        return (script, out)
    }

    static func configure(_ m: MountedLabstream, _ lines: String) throws {
        let conf = m.configDir + "/labstream.conf"
        try (try String(contentsOfFile: conf, encoding: .utf8) + "\n[daemon]\n" + lines + "\n").write(toFile: conf, atomically: true, encoding: .utf8)
    }

    static func environment(_ path: String) -> [String: String]? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var env: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            env[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        return env
    }

    @Test func onCompleteRunsWithTheFilesEnvironmentAndAHangingHookIsKilledWhileAnotherRuns() throws {
        let m = try MountedLabstream("hook-complete")
        let (script, out) = try Self.hook(m, hang: "Beta (2002)")
        // The output folder is an argument: quoted, as the documented rule allows.
        try Self.configure(m, "on_complete = \(script) \"\(out)\"\nhook_timeout = 10")
        try m.mount()
        let beta = m.path("test/Movies/Beta (2002)/Beta (2002).mp4"), gamma = m.path("test/Movies/Gamma/Gamma.mkv")
        #expect(try m.cli(["pin", "--wait", beta]).code == 0)
        // Beta's hook hangs (its child sleeps); Gamma's runs beside it all the same.
        #expect(eventually { FileManager.default.fileExists(atPath: out + "/sleep.pid") })
        let sleeper = Int32(try String(contentsOfFile: out + "/sleep.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(try m.cli(["pin", "--wait", gamma]).code == 0)
        #expect(eventually { FileManager.default.fileExists(atPath: out + "/Gamma.env") })
        #expect(!m.log.contains("did not finish"), "Gamma's hook waited for Beta's: \(m.log)")
        let env = try #require(Self.environment(out + "/Gamma.env"))
        #expect(env["LABSTREAM_PATH"] == gamma)
        #expect(env["LABSTREAM_SERVER"] == "test")
        #expect(env["LABSTREAM_TITLE"] == "Gamma")
        #expect(env["LABSTREAM_STATE"] == "unverified")  // the playback check is off in these tests
        #expect(env["LABSTREAM_REASON"] == StatusReason.probeOff.sentence)
        let extra = env.keys.filter { !["PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD"].contains($0) && !$0.hasPrefix("LABSTREAM_") }
        #expect(extra.isEmpty, "the hook sees more of the daemon's environment than it should: \(extra)")
        #expect(
            Set(env.keys.filter { $0.hasPrefix("LABSTREAM_") }) == [
                "LABSTREAM_PATH", "LABSTREAM_SERVER", "LABSTREAM_TITLE", "LABSTREAM_STATE", "LABSTREAM_REASON"
            ])
        let text = try String(contentsOfFile: out + "/Gamma.env", encoding: .utf8)
        #expect(!text.contains(m.fixture.accessToken) && !text.contains("secret-pass"))
        // The hanging hook is killed at its timeout, its child with it, and the log says so.
        #expect(eventually(timeout: 30) { m.log.contains("on_complete hook for \(beta) did not finish within 10 s (hook_timeout): killed") }, "\(m.log)")
        #expect(eventually { sleeper > 0 && kill(sleeper, 0) != 0 }, "the hook's child \(sleeper) outlived it")
        #expect(!FileManager.default.fileExists(atPath: out + "/Beta (2002).env"))
        #expect(m.log.contains("on_complete hook for \(gamma) ran"))
        // Each finish runs its hook once: a restart does not run them again.
        try m.unmount()
        try m.mount()
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path("test/Movies"))
        try m.unmount()
        #expect(m.log.components(separatedBy: "on_complete hook for \(gamma) ran").count == 2, "\(m.log)")
    }

    /// A pinned file is complete only once what belongs beside it is stored: its hook runs then.
    @Test func onCompleteWaitsForTheArtworkAndSubtitlesBesideTheFile() throws {
        let m = try MountedLabstream("hook-beside", catalog: SideAssetTests.catalog, cacheConfig: "side_assets = pinned")
        let (script, out) = try Self.hook(m)
        try Self.configure(m, "on_complete = \(script) \(out)")
        try m.mount()
        // The media arrives while its artwork and subtitles are held back on the server.
        m.fixture.holdSideAssets(true)
        defer { m.fixture.holdSideAssets(false) }
        let film = m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv")
        #expect(try m.cli(["pin", film]).code == 0)
        #expect(eventually { StatusCommandXattr.get(film, "reason") == StatusReason.fetchingSideAssets.sentence })
        m.fixture.holdSideAssets(false)
        #expect(eventually { FileManager.default.fileExists(atPath: out + "/Alpha (2001).env") })
        let listed = try String(contentsOfFile: out + "/Alpha (2001).ls", encoding: .utf8).split(separator: "\n")
        #expect(listed.contains("poster.jpg") && listed.contains("Alpha (2001).eng.srt"), "\(listed)")
        try m.unmount()
    }

    @Test func onFailedRunsForAFileThatFailsAndAFailingHookIsLogged() throws {
        // Random bytes: the playback check rightly fails them.
        let m = try MountedLabstream("hook-failed", probe: true)
        let (script, out) = try Self.hook(m, exit: 3)
        try Self.configure(m, "on_failed = \(script) \(out)")
        try m.mount()
        let gamma = m.path("test/Movies/Gamma/Gamma.mkv")
        _ = try m.cli(["pin", "--wait", gamma])
        #expect(eventually { FileManager.default.fileExists(atPath: out + "/Gamma.env") })
        let env = try #require(Self.environment(out + "/Gamma.env"))
        #expect(env["LABSTREAM_PATH"] == gamma && env["LABSTREAM_STATE"] == "failed")
        #expect(!(env["LABSTREAM_REASON"] ?? "").isEmpty)
        #expect(eventually { m.log.contains("on_failed hook for \(gamma) failed: exit status 3") }, "\(m.log)")
        try m.unmount()
    }
}

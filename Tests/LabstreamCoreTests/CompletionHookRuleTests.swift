import LabstreamCore
import Testing

@Suite struct CompletionHookRuleTests {
    @Test func commandsSplitByTheDocumentedRuleWithoutAShell() throws {
        #expect(try HookCommand.split("/usr/bin/notify -u low").get() == ["/usr/bin/notify", "-u", "low"])
        #expect(try HookCommand.split("/bin/x  \"two words\" a\\b \"q\\\"uote\\\\\"").get() == ["/bin/x", "two words", "a\\b", "q\"uote\\"])
        // Shell syntax is only characters: nothing is expanded, piped or globbed.
        #expect(try HookCommand.split("/bin/echo $HOME | *; rm").get() == ["/bin/echo", "$HOME", "|", "*;", "rm"])
        #expect(try HookCommand.split("/bin/x \"\"").get() == ["/bin/x", ""])
        #expect(HookCommand.split("notify-send done") == .failure(.notAbsolute("notify-send")))
        #expect(HookCommand.split("/bin/x \"open") == .failure(.unclosedQuote))
        #expect(HookCommand.split("/bin/x \"\\n\"") == .failure(.badEscape("n")))
        #expect(HookCommand.split("   ") == .failure(.empty))
        let argv = ["/opt/my hook", "a\"b", "c\\d", "", "plain"]
        #expect(try HookCommand.split(HookCommand.joined(argv)).get() == argv)
    }

    @Test func aPinnedRowFinishesOnceWithItsOutcome() {
        let awaiting = StatusReason.awaitingValidation
        #expect(FinishedFile.newOutcome(pinned: true, before: (.downloading, nil), after: (.unverified, awaiting)) == nil)
        #expect(FinishedFile.newOutcome(pinned: true, before: (.unverified, awaiting), after: (.complete, nil)) == .complete)
        #expect(FinishedFile.newOutcome(pinned: true, before: (.downloading, nil), after: (.unverified, StatusReason.probeOff)) == .unverified)
        #expect(FinishedFile.newOutcome(pinned: true, before: (.queued, nil), after: (.failed, .said("gone"))) == .failed)
        #expect(FinishedFile.newOutcome(pinned: true, before: nil, after: (.complete, nil)) == .complete)
        // Saved again in the same outcome (a reason reworded, a checkpoint): no second run.
        #expect(FinishedFile.newOutcome(pinned: true, before: (.failed, .said("a")), after: (.failed, .said("b"))) == nil)
        #expect(FinishedFile.newOutcome(pinned: true, before: (.complete, nil), after: (.complete, nil)) == nil)
        // Files read on demand run no hook.
        #expect(FinishedFile.newOutcome(pinned: false, before: (.partial, nil), after: (.complete, nil)) == nil)
    }

    @Test func theEnvironmentHoldsTheFileAndNeverAToken() {
        let env = FinishedFile.environment(
            path: "/srv/media/home/Movies/Heat (1995)/Heat (1995).mkv", server: "home", title: FinishedFile.title(ofName: "Heat (1995).mkv"),
            outcome: .failed, reason: .said("GET http://h/Videos/1?api_key=s3cr3t answered 500"),
            base: ["PATH": "/usr/bin", "HOME": "/root", "LABSTREAM_CONFIG_DIR": "/etc/labstream", "SECRET": "x"])
        #expect(env["LABSTREAM_TITLE"] == "Heat (1995)" && env["LABSTREAM_STATE"] == "failed" && env["LABSTREAM_SERVER"] == "home")
        #expect(env["LABSTREAM_REASON"] == "GET http://h/Videos/1?api_key=[redacted] answered 500")
        #expect(Set(env.keys) == ["PATH", "HOME", "LABSTREAM_PATH", "LABSTREAM_SERVER", "LABSTREAM_TITLE", "LABSTREAM_STATE", "LABSTREAM_REASON"])
    }

    @Test func hookSettingsParseFromTheDaemonSection() throws {
        let c = try LabstreamConfig.parse("[daemon]\non_complete = /usr/local/bin/done \"my file\"\non_failed = /bin/true\nhook_timeout = 5\n")
        #expect(c.onComplete == ["/usr/local/bin/done", "my file"] && c.onFailed == ["/bin/true"] && c.hookTimeout == 5)
        #expect(try LabstreamConfig.parse(c.serialized()).onComplete == c.onComplete)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[daemon]\non_complete = notify-send done\n") }
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[daemon]\nhook_timeout = 0\n") }
    }
}

import Glibc
import LabstreamCore
import Testing

@Suite struct AccessPolicyTests {
    let media = AccessPolicy.Group(name: "media", gid: 1500)

    @Test func changesAreForTheDaemonsUserRootAndTheControlGroup() {
        let policy = AccessPolicy(daemonUID: 1000, controlGroup: media)
        #expect(policy.decide(Caller(uid: 1000, gid: 1000), .change) == .allowed(.daemonUser))
        #expect(policy.decide(Caller(uid: 0, gid: 0), .change) == .allowed(.root))
        // A member by a supplementary group, or by the primary one.
        #expect(policy.decide(Caller(uid: 1001, gid: 1001, groups: [27, 1500]), .change) == .allowed(.controlGroup))
        #expect(policy.decide(Caller(uid: 1002, gid: 1500), .change) == .allowed(.controlGroup))
        let refused = policy.decide(Caller(uid: 65534, gid: 65534, groups: [100]), .change)
        #expect(refused == .refused(.init(code: .notInControlGroup, daemonUID: 1000, group: "media")))
    }

    @Test func withoutAControlGroupOnlyTheDaemonsUserAndRootMayChange() {
        let policy = AccessPolicy(daemonUID: 1000)
        #expect(policy.decide(Caller(uid: 1000, gid: 1000), .change) == .allowed(.daemonUser))
        #expect(policy.decide(Caller(uid: 0, gid: 0), .change) == .allowed(.root))
        // Sharing a gid number with nothing configured counts for nothing.
        #expect(policy.refusal(Caller(uid: 1001, gid: 1000, groups: [1000])) == .init(code: .noControlGroup, daemonUID: 1000, group: nil))
    }

    @Test func readingIsLeftToTheDoorsOwnGate() {
        // The mount's options and the socket's mode decide who reads; the policy adds nothing.
        #expect(AccessPolicy(daemonUID: 1000).decide(Caller(uid: 65534, gid: 65534), .read) == .allowed(.reading))
    }

    @Test func aRefusalSaysWhomToAskAndWhat() {
        let group = AccessPolicy.Refusal(code: .notInControlGroup, daemonUID: 1000, group: "media").sentence
        #expect(group.contains("group 'media'") && group.contains("usermod -aG media") && group.contains("uid 1000"))
        let none = AccessPolicy.Refusal(code: .noControlGroup, daemonUID: 1000, group: nil).sentence
        #expect(none.contains("control_group") && none.contains("[access]") && !none.contains("'media'"))
        let root = AccessPolicy.Refusal(code: .noControlGroup, daemonUID: 0, group: nil).sentence
        #expect(root.contains("is for root only") && !root.contains("uid 0"))
    }

    @Test func theRootAttributeCarriesTheRefusalToTheCLI() {
        let policy = AccessPolicy(daemonUID: 1000, controlGroup: media)
        #expect(policy.attribute == "uid=1000 group=media")
        #expect(AccessPolicy.refusal(attribute: policy.attribute) == policy.refusal(Caller(uid: 7, gid: 7)))
        let alone = AccessPolicy(daemonUID: 0)
        #expect(AccessPolicy.refusal(attribute: alone.attribute) == alone.refusal(Caller(uid: 7, gid: 7)))
        #expect(AccessPolicy.refusal(attribute: "uid=1000 group=media future=1")?.group == "media")
        #expect(AccessPolicy.refusal(attribute: "group=media") == nil)
        #expect(AccessPolicy.refusal(attribute: "nonsense") == nil)
    }

    @Test func theControlGroupIsReadFromTheAccessSection() throws {
        let config = try LabstreamConfig.parse("[access]\ncontrol_group = media\n")
        #expect(config.controlGroup == "media")
        #expect(try LabstreamConfig.parse(config.serialized()).controlGroup == "media")
        #expect(try LabstreamConfig.parse("").controlGroup == nil)
        for (text, says) in [
            ("[access]\ncontrol_group = 1500\n", "must name a group"), ("[access]\ncontrol_group =\n", "must name a group"),
            ("[access]\ncontrol_group = a b\n", "must name a group"), ("[access]\nowner = me\n", "unknown access key")
        ] {
            #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(text) }
            do { _ = try LabstreamConfig.parse(text) } catch { #expect(error.message.contains(says), "\(text): \(error.message)") }
        }
    }

    @Test func aRefusedChangeIsEACCESAndExit77() {
        let why = LabstreamError.accessRefused(.init(code: .noControlGroup, daemonUID: 1, group: nil))
        #expect(ErrnoMap.errno(for: why) == EACCES)
        #expect(ExitCode.of(why) == ExitCode.noPerm)
        #expect(why.userMessage.contains("[access]"))
    }
}

@Suite struct DataDirModesTests {
    @Test func othersGetNothingAndTheControlGroupOnlyAWayToTheSocket() {
        let alone = DataDirModes(AccessPolicy(daemonUID: 1000))
        #expect([alone.directory, alone.socket, alone.lock] == [0o700, 0o600, 0o600])
        let shared = DataDirModes(AccessPolicy(daemonUID: 1000, controlGroup: .init(name: "media", gid: 1500)))
        // Enter (not list) the data dir, read the lock, connect to the socket.
        #expect([shared.directory, shared.socket, shared.lock] == [0o710, 0o660, 0o640])
        for mode in [alone.directory, alone.socket, alone.lock, shared.directory, shared.socket, shared.lock, DataDirModes.privateFile] {
            #expect(mode & 0o007 == 0, "mode \(String(mode, radix: 8)) is open to others")
        }
        #expect(DataDirModes.privateFile == 0o600)
    }
}

import LabstreamCore
import Testing

@Suite struct KernelIOModeTests {
    @Test func aFileNoOneHasOpenPassesThroughOnlyWhenEligible() {
        let modes = KernelIOModes()
        #expect(modes.decide(ino: 5, version: "v1", eligible: true) == .register)
        #expect(modes.decide(ino: 5, version: "v1", eligible: false) == .cached)
    }

    @Test func anInodeOpenThroughTheDaemonStaysSoUntilItsLastRelease() {
        var modes = KernelIOModes()
        modes.opened(handle: 1, ino: 5, mode: .cached)
        modes.opened(handle: 2, ino: 5, mode: .cached)
        // The file completed meanwhile: still no passthrough, the kernel would fail the open.
        #expect(modes.decide(ino: 5, version: "v1", eligible: true) == .cached)
        #expect(modes.released(handle: 1) == nil)
        #expect(modes.decide(ino: 5, version: "v1", eligible: true) == .cached)
        #expect(modes.released(handle: 2) == nil)
        #expect(modes.decide(ino: 5, version: "v1", eligible: true) == .register)
        // Other inodes were never affected.
        #expect(modes.decide(ino: 6, version: "v1", eligible: true) == .register)
    }

    @Test func passthroughOpensShareOneBackingFileThatGoesWithTheLast() {
        var modes = KernelIOModes()
        modes.opened(handle: 1, ino: 5, mode: .passthrough(backing: 9, version: "v1"))
        // Even a file that is no longer eligible must name the same backing file: the kernel
        // allows no other mode on this inode while one passthrough open lasts.
        #expect(modes.decide(ino: 5, version: "v1", eligible: false) == .reuse(backing: 9))
        modes.opened(handle: 2, ino: 5, mode: .passthrough(backing: 9, version: "v1"))
        #expect(modes.mode(of: 2) == .passthrough(backing: 9, version: "v1"))
        // A new version of the file cannot share the old one's backing file, nor read beside it.
        #expect(modes.decide(ino: 5, version: "v2", eligible: true) == .busy)
        #expect(modes.released(handle: 2) == nil)
        #expect(modes.released(handle: 1) == 9)
        #expect(modes.decide(ino: 5, version: "v2", eligible: true) == .register)
        #expect(modes.decide(ino: 5, version: "v1", eligible: false) == .cached)
        #expect(modes.mode(of: 1) == nil)
    }

    @Test func anUnknownOrRepeatedReleaseChangesNothing() {
        var modes = KernelIOModes()
        modes.opened(handle: 1, ino: 5, mode: .passthrough(backing: 3, version: "v1"))
        #expect(modes.released(handle: 7) == nil)
        #expect(modes.released(handle: 1) == 3)
        #expect(modes.released(handle: 1) == nil)
        #expect(modes.decide(ino: 5, version: "v1", eligible: true) == .register)
    }
}

import LabstreamCore
import Testing

/// Every refusal before a mount, verbatim.
@Suite struct MountPreflightTests {
    typealias F = MountPreflight.Facts

    @Test(
        arguments: [
            (
                F(mountpoint: "/m", entries: ["a", "b"]), MountPreflight.Problem.notEmpty,
                "the mountpoint /m is not empty (2 entries); mounting would hide them: give an empty directory"
            ),
            (F(mountpoint: "/m", isDirectory: false), .notADirectory, "the mountpoint /m is not a directory; give an empty directory"),
            (
                F(mountpoint: "/m", mountedType: "fuse.labstream"), .alreadyMounted,
                "/m is already a Labstream mount; unmount it first with: labstream unmount /m"
            ),
            (F(mountpoint: "/m", mountedType: "ext4"), .alreadyMounted, "/m is already a mount point (ext4); unmount it first or give another empty directory"),
            (
                F(mountpoint: "/m", device: .missing), .noDevice,
                "/dev/fuse does not exist: load the fuse module (modprobe fuse), or give the container --device /dev/fuse"
            ),
            (
                F(mountpoint: "/m", device: .denied), .deviceDenied,
                "no permission to open /dev/fuse: run as root, or add your user to the group that owns /dev/fuse"
            ),
            (
                F(mountpoint: "/m", allowOther: true, euid: 1000, fuseConf: "# user_allow_other\nmount_max = 1000\n"), .allowOtherNotPermitted,
                "allow_other needs a 'user_allow_other' line in /etc/fuse.conf when not run as root; add it, or drop allow_other"
            )
        ] as [(F, MountPreflight.Problem, String)])
    func refusals(facts: F, problem: MountPreflight.Problem, message: String) {
        let verdict = MountPreflight.check(facts)
        #expect(verdict?.0 == problem)
        #expect(verdict?.1 == message)
    }

    @Test func whatMayMount() {
        #expect(MountPreflight.check(F(mountpoint: "/m")) == nil)
        #expect(MountPreflight.check(F(mountpoint: "/m", allowOther: true, euid: 0)) == nil)
        #expect(MountPreflight.check(F(mountpoint: "/m", allowOther: true, euid: 1000, fuseConf: "user_allow_other  # yes\n")) == nil)
    }
}

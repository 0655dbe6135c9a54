import Foundation
import LabstreamCore
import Testing

@testable import LabstreamCLI
@testable import LabstreamDaemon

/// Man pages and unit files stay true and well-formed.
@Suite struct DocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test(arguments: ["man/labstream.1", "man/labstream.conf.5", "man/mount.labstream.8"])
    func manPagesRenderWithoutWarnings(page: String) throws {
        let r = try runProcess("/usr/bin/groff", ["-man", "-ww", "-z", Self.root + "/" + page], environment: ["LC_ALL": "C"])
        #expect(r.code == 0 && r.stderr.isEmpty, "\(page): \(r.stderr)")
    }

    @Test func everySubcommandInHelpIsInTheManPage() throws {
        let help = try runProcess(labstreamBinary, ["--help"]).stdout
        let man = try String(contentsOfFile: Self.root + "/man/labstream.1", encoding: .utf8).replacingOccurrences(of: "\\-", with: "-")
        let usage = help.components(separatedBy: "Global options")[0]
        var commands = Set<String>()
        for line in usage.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix("labstream ") {
            let words = line.split(separator: " ")
            for alternative in words[1].split(separator: "|") where alternative.first?.isLetter == true { commands.insert(String(alternative)) }
        }
        #expect(commands.isSuperset(of: ["server", "mount", "unmount", "status", "sync", "pin", "unpin", "pause", "verify", "demo"]))
        for command in commands {
            #expect(man.contains(command), "labstream(1) does not mention \(command)")
        }
    }

    /// Every option a command's parser takes is in that command's usage lines in the top-level
    /// `--help` and in its heading in labstream(1) (status --watch and --plex-tv-url were not).
    @Test func everyOptionACommandTakesIsInItsUsageAndManHeading() throws {
        let help = try runProcess(labstreamBinary, ["--help"]).stdout.components(separatedBy: "Global options")[0]
        let man = try String(contentsOfFile: Self.root + "/man/labstream.1", encoding: .utf8)
        let lines = man.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // The heading of an entry is the line after `.TP`, with groff's escapes taken out.
        let headings = zip(lines, lines.dropFirst()).filter { $0.0 == ".TP" }.map {
            $0.1.replacingOccurrences(of: "\\f[BIRP]", with: "", options: .regularExpression).replacingOccurrences(of: "\\-", with: "-")
        }
        let internalOnly: Set<String> = ["--ready-fd", "-f", "-h", "--help", "-v", "--verbose"]
        let commands: [(String, Arguments.Spec)] = [
            ("status", StatusCommand.spec), ("pin", PinCommand.spec), ("mount", MountCommand.spec),
            ("server", ServerCommands.spec), ("orphans", RepairCommand.orphansSpec)
        ]
        for (command, spec) in commands {
            let usage = help.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("labstream \(command) ") }.joined(separator: " ")
            let heading = headings.filter { $0.hasPrefix(".B \(command) ") }.joined(separator: " ")
            #expect(!usage.isEmpty && !heading.isEmpty, "\(command)")
            for option in spec.valued.union(spec.flags).subtracting(Context.globalValued).subtracting(internalOnly) {
                #expect(usage.contains(option), "labstream --help: the usage of \(command) omits \(option)")
                #expect(heading.contains(option), "labstream(1): the heading of \(command) omits \(option)")
            }
        }
    }

    /// Every attribute the filesystem engine answers, and every action it takes, is in
    /// labstream(1)'s EXTENDED ATTRIBUTES; every -o cache option names its labstream.conf key.
    /// README says the `labstream` binary links neither the emulators nor their fault hooks:
    /// their names are not in it, while the same search finds them in `labstream-fixture`.
    @Test func theExecutableCarriesNoFaultHooks() throws {
        let fixtureBinary = URL(fileURLWithPath: labstreamBinary).deletingLastPathComponent().appendingPathComponent("labstream-fixture").path
        let shipped = try Data(contentsOf: URL(fileURLWithPath: labstreamBinary))
        let fixture = try Data(contentsOf: URL(fileURLWithPath: fixtureBinary))
        for name in ["dropAfter", "FaultyFile"] {
            #expect(fixture.range(of: Data(name.utf8)) != nil, "the search does not find \(name) in labstream-fixture")
            #expect(shipped.range(of: Data(name.utf8)) == nil, "labstream carries \(name)")
        }
    }

    @Test func everyAttributeActionAndMountOptionIsDocumented() throws {
        let source = try String(contentsOfFile: Self.root + "/Sources/LabstreamFS/FilesystemEngine.swift", encoding: .utf8)
        let man = try String(contentsOfFile: Self.root + "/man/labstream.1", encoding: .utf8).replacingOccurrences(of: "\\-", with: "-")
        let section = man.components(separatedBy: ".SH EXTENDED ATTRIBUTES")[1].components(separatedBy: ".SH ")[0]
        let names = source.components(separatedBy: "xattrPrefix + \"").dropFirst().compactMap { $0.split(separator: "\"").first.map(String.init) }
        #expect(names.count >= 8)
        for name in Set(names) {
            #expect(section.contains("user.labstream." + name), "EXTENDED ATTRIBUTES does not mention user.labstream.\(name)")
        }
        for action in QueueAction.allCases { #expect(section.contains(action.rawValue), "EXTENDED ATTRIBUTES does not mention \(action)") }
        for page in ["man/labstream.1", "man/mount.labstream.8"] {
            let text = try String(contentsOfFile: Self.root + "/" + page, encoding: .utf8)
            #expect(text.contains("cache_max") && text.contains("max_size"), "\(page) offers cache_max without naming max_size")
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"), "needs systemd-analyze (present on CI)"))
    func unitFilesVerify() throws {
        let scratch = Scratch("units")
        for name in ["srv-media.mount", "srv-media.automount"] {
            try FileManager.default.copyItem(atPath: Self.root + "/mountpoints/" + name, toPath: scratch.path + "/" + name)
        }
        let service = try String(contentsOfFile: Self.root + "/mountpoints/labstream@.service", encoding: .utf8)
            .replacingOccurrences(of: "/usr/local/bin/labstream", with: labstreamBinary)
        try service.write(toFile: scratch.path + "/labstream@.service", atomically: true, encoding: .utf8)
        let r = try runProcess(
            "/usr/bin/systemd-analyze",
            [
                "verify", "--man=no", scratch.path + "/srv-media.mount",
                scratch.path + "/srv-media.automount", scratch.path + "/labstream@srv-media.service"
            ])
        #expect(r.code == 0, "\(r.stdout) \(r.stderr)")
    }

    @Test func installAndUninstallIntoADestdir() throws {
        let scratch = Scratch("install")
        let dest = scratch.path + "/root"
        // The release build is not part of make test: install the binary the tests use.
        let r = try runProcess("/usr/bin/make", ["-C", Self.root, "install", "DESTDIR=\(dest)", "PREFIX=/usr/local", "INSTALL_BIN=\(labstreamBinary)"])
        try #require(r.code == 0, "make install failed: \(r.stderr)")
        for path in [
            "/usr/local/bin/labstream", "/usr/local/share/man/man1/labstream.1", "/usr/local/share/man/man5/labstream.conf.5",
            "/usr/local/share/man/man8/mount.labstream.8", "/usr/local/lib/systemd/system/labstream@.service",
            "/usr/local/lib/systemd/system/srv-media.mount", "/usr/local/lib/systemd/system/srv-media.automount"
        ] {
            #expect(FileManager.default.fileExists(atPath: dest + path), "\(path) not installed")
        }
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dest + "/sbin/mount.labstream")) == "/usr/local/bin/labstream")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: dest + "/usr/local/bin/mount.labstream")) == "labstream")
        let help = try runProcess(dest + "/usr/local/bin/mount.labstream", ["--help"])
        #expect(help.stdout.hasPrefix("Usage: mount.labstream SOURCE MOUNTPOINT"))
        let u = try runProcess("/usr/bin/make", ["-C", Self.root, "uninstall", "DESTDIR=\(dest)", "PREFIX=/usr/local"])
        #expect(u.code == 0)
        for path in ["/usr/local/bin/labstream", "/sbin/mount.labstream", "/usr/local/share/man/man8/mount.labstream.8"] {
            #expect(!FileManager.default.fileExists(atPath: dest + path), "\(path) left behind")
        }
    }
}

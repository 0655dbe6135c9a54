import Foundation
import LabstreamCore
import LabstreamEngine
import Testing

@testable import LabstreamCLI
@testable import LabstreamDaemon

/// Man pages and unit files stay true and well-formed.
@Suite struct DocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test(arguments: ["man/labstream.1", "man/labstream.conf.5", "man/labstream-http.7", "man/mount.labstream.8"])
    func manPagesRenderWithoutWarnings(page: String) throws {
        let r = try runProcess("/usr/bin/groff", ["-man", "-ww", "-z", Self.root + "/" + page], environment: ["LC_ALL": "C"])
        #expect(r.code == 0 && r.stderr.isEmpty, "\(page): \(r.stderr)")
    }

    /// Every page as `man` shows it has no words run together: a macro's arguments are joined
    /// without spaces, so `.IR … ext . A file …` showed `.ext.Afiletheserverlistswithoutasize`,
    /// `.RI ( … /..., as bare` showed `/...,asbare`, and `.BR "labstream sync" . Without` showed
    /// `sync.Without`.
    @Test(arguments: ["man/labstream.1", "man/labstream.conf.5", "man/labstream-http.7", "man/mount.labstream.8"])
    func manPagesRunNoWordsTogether(page: String) throws {
        let glued = Self.wordsRunTogether(try Self.render(file: Self.root + "/" + page))
        #expect(glued.isEmpty, "\(page): \(glued)")
    }

    /// The check finds the three cases labstream(1) had (as they were written), and passes the
    /// joins that are meant: a literal in one font, a placeholder after a key, a file's extension.
    @Test func theRunTogetherCheckFindsWhatItIsFor() throws {
        let old = [
            ".IR SERVER / LIBRARY /Artist/Title\\ (Year). ext . A file the server lists without a size",
            ".RI ( SERVER / LIBRARY /..., as bare\n.B status\nprints them)",
            "the moment it answers without a remount or\n.BR \"labstream sync\" . Without\n.B \\-\\-foreground\nthe command returns"
        ]
        for troff in old {
            let glued = Self.wordsRunTogether(try Self.render(troff: ".TH T 1\n.SH NAME\nt\n.SH DESCRIPTION\n" + troff + "\n"))
            #expect(glued.count == 1, "\(troff): \(glued)")
        }
        let meant = [
            ".IR SERVER / LIBRARY /Title\\ (Year). ext\nfor movies.", ".BR UserData.Played ,\nPlex", ".BI user.labstream.reachability. NAME\nfor each.",
            ".B latest\\-season,delete\\-watched\nis one value.", "A sentence. Another one."
        ]
        for troff in meant {
            let glued = Self.wordsRunTogether(try Self.render(troff: ".TH T 1\n.SH NAME\nt\n.SH DESCRIPTION\n" + troff + "\n"))
            #expect(glued.isEmpty, "\(troff): \(glued)")
        }
    }

    enum Font { case roman, bold, italic }

    /// A page as man(1) lays it out for a terminal, with each character's font (groff's
    /// overstrikes: `c\bc` bold, `_\bc` italic), on lines too long to wrap and unhyphenated.
    static func render(file: String? = nil, troff: String? = nil) throws -> [(Unicode.Scalar, Font)] {
        let r = try runProcess(
            "/usr/bin/groff", ["-man", "-Tutf8", "-P-c", "-rHY=0", "-rLL=400n"] + (file.map { [$0] } ?? []), environment: ["LC_ALL": "C.UTF-8"],
            stdin: troff)
        try #require(r.code == 0, "groff: \(r.stderr)")
        let scalars = Array(r.stdout.unicodeScalars)
        var out: [(Unicode.Scalar, Font)] = []
        var i = 0
        while i < scalars.count {
            // A chain `a\bb\b…c` is the last character, struck over by the others.
            var j = i
            while j + 2 < scalars.count && scalars[j + 1] == "\u{8}" { j += 2 }
            let glyph = scalars[j]
            let struck = stride(from: i, to: j, by: 2).map { scalars[$0] }
            out.append((glyph, struck.isEmpty ? .roman : struck.contains("_") && glyph != "_" ? .italic : .bold))
            i = j + 1
        }
        return out
    }

    /// The runs without white space in which words were run together: a letter right after a
    /// letter of another font (two arguments of a font macro: `as`+`bare`); across a change of
    /// font, a sentence's end right before a capitalised word (`sync.Without`, `ext.A`) or a
    /// comma, semicolon or colon right before a word (`...,as`). A run in one font is a literal
    /// (`UserData.Played`, `latest-season,delete-watched`), and capitals after a dot a
    /// placeholder (`reachability.NAME`).
    static func wordsRunTogether(_ text: [(Unicode.Scalar, Font)]) -> [String] {
        func isLetter(_ c: Unicode.Scalar) -> Bool { c.properties.isAlphabetic }
        func isUpper(_ c: Unicode.Scalar) -> Bool { c.properties.isUppercase }
        var found: [String] = []
        var run: [(Unicode.Scalar, Font)] = []
        func glued() -> Bool {
            for k in run.indices.dropLast() {
                let (c, fc) = run[k], (d, fd) = run[k + 1]
                if isLetter(c) && isLetter(d) && fc != fd { return true }
                if ",;:".unicodeScalars.contains(c) && isLetter(d) && fc != fd { return true }
                guard ".!?".unicodeScalars.contains(c), isUpper(d), k > 0 else { continue }
                let (b, fb) = run[k - 1]
                guard b.properties.isLowercase || b == ")", Set([fb, fc, fd]).count > 1 else { continue }
                let word = run[(k + 1)...].prefix { isLetter($0.0) && $0.1 == fd }.map(\.0)
                if word.count == 1 || !word.allSatisfy(isUpper) { return true }
            }
            return false
        }
        for c in text + [(" ", .roman)] {
            if c.0.properties.isWhitespace {
                if glued() { found.append(String(String.UnicodeScalarView(run.map(\.0)))) }
                run = []
            } else {
                run.append(c)
            }
        }
        return found
    }

    /// labstream.conf(5) says what `min_free`, `max_size` and `max_concurrent_files` do today:
    /// the floor holds for pinned fills and reads, with its default; the budget parks a pin with
    /// its own cause; a file waiting out a backoff holds no place among the files filled at once
    /// (one waiting for the server to prepare its copy does), and they are taken in queue order.
    @Test func theCacheLimitsAreDocumentedAsTheyWork() throws {
        let page = String(String.UnicodeScalarView(try Self.render(file: Self.root + "/man/labstream.conf.5").map(\.0)))
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        func entry(_ key: String) -> String { page.components(separatedBy: " \(key) ").dropFirst().first?.prefix(600).description ?? "" }
        let floor = "default \(StorageBudget.defaultMinFree >> 20)M"
        #expect(TransferEngine.Settings().budget.minFree == StorageBudget.defaultMinFree && LabstreamConfig().minFree == StorageBudget.defaultMinFree)
        #expect(entry("min_free").contains(floor) && entry("min_free").contains("holds for pinned downloads and for reads"), "\(entry("min_free"))")
        let budget = page.components(separatedBy: " max_size The storage budget: ").dropFirst().first?.prefix(900).description ?? ""
        #expect(budget.contains("every byte stored counts") && budget.contains("over_budget") && budget.contains("ENOSPC"), "\(budget)")
        #expect(page.contains("max_size A storage budget for this server's copies alone"))
        #expect(entry("max_concurrent_files").contains("default \(LabstreamConfig().maxConcurrentFiles)."), "\(entry("max_concurrent_files"))")
        let slots = entry("max_concurrent_files")
        #expect(slots.contains("backoff holds no place") && slots.contains("so it counts") && slots.contains("queue order"), "\(slots)")
    }

    /// labstream.conf(5) says which settings SIGHUP takes into the running daemon: the budget
    /// among them (`Daemon.reconfigure` hands it to the engine).
    @Test func theSettingsSIGHUPReloadsAreDocumented() throws {
        let page = String(String.UnicodeScalarView(try Self.render(file: Self.root + "/man/labstream.conf.5").map(\.0)))
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let section = page.components(separatedBy: "RELOADING ").dropFirst().first?.components(separatedBy: "EXAMPLE").first ?? ""
        for key in ["SIGHUP", "control_group", "max_size, min_free and each server's max_size", "over_budget", "next mount"] {
            #expect(section.contains(key), "\(key) missing from RELOADING: \(section)")
        }
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
            ("server", ServerCommands.spec), ("orphans", RepairCommand.orphansSpec), ("queue", QueueCommand.spec)
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
            "/usr/local/share/man/man8/mount.labstream.8", "/usr/local/share/man/man7/labstream-http.7", "/usr/local/lib/systemd/system/labstream@.service",
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

import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamStore

enum ServerCommands {
    static let spec = Arguments.Spec(
        valued: Context.globalValued.union(["--url", "--user", "--server", "--plex-tv-url", "--profile"]),
        flags: Context.globalFlags.union(["--password-stdin", "--token-stdin", "--pin", "--pin-stdin", "--device", "--json", "--delete-files"]))

    static let plexTV = "https://plex.tv"

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.server); return ExitCode.ok }
        let context = Context(args: args)
        switch args.positionals.first {
        case "add": return try add(args, context)
        case "list": return try list(args, context)
        case "remove": return try remove(args, context)
        case nil: throw UsageError("labstream server needs a subcommand: add, list or remove")
        case let other?: throw UsageError("unknown server subcommand '\(other)'; use add, list or remove")
        }
    }

    static func readStdin() -> String {
        var data = Data()
        while let line = readLine(strippingNewline: false) { data.append(contentsOf: Array(line.utf8)) }
        var s = String(decoding: data, as: UTF8.self)
        while s.hasSuffix("\n") || s.hasSuffix("\r") { s.removeLast() }
        return s
    }

    static func add(_ args: Arguments, _ context: Context) throws -> Int32 {
        guard args.positionals.count == 3 else {
            throw UsageError("usage: labstream server add jellyfin NAME --url URL --user USER (--password-stdin | --token-stdin)")
        }
        let name = args.positionals[2]
        guard let kind = BackendKind(named: args.positionals[1]) else {
            throw UsageError("unsupported server type '\(args.positionals[1])'; supported: \(BackendKind.spellings)")
        }
        if let problem = LabstreamConfig.validateServerName(name) { throw UsageError(problem) }
        for option in ["--url", "--plex-tv-url"] {
            guard let url = args.value(option) else { continue }
            guard url.hasPrefix("http://") || url.hasPrefix("https://"), !url.contains("@") else {
                throw UsageError("\(option) must be an http:// or https:// URL without credentials in it")
            }
        }
        switch kind {
        case .plex: return try addPlex(args, context, name: name)
        case .silo: return try addSilo(args, context, name: name)
        case .jellyfin, .emby: break
        }
        guard let flavor = MediaBrowserFlavor(kind: kind) else { throw UsageError("\(kind.product) is not a MediaBrowser server") }
        guard let url = args.value("--url") else { throw UsageError("server add needs --url URL") }
        let user = args.value("--user")
        let viaPassword = args.flag("--password-stdin"), viaToken = args.flag("--token-stdin")
        guard viaPassword != viaToken else { throw UsageError("give exactly one of --password-stdin or --token-stdin") }
        if viaPassword && user == nil { throw UsageError("--password-stdin needs --user USER") }

        let secret = readStdin()
        guard !secret.isEmpty else { throw UsageError("nothing was read from standard input") }
        let described = try addMediaBrowser(flavor, context, name: name, url: url, user: user, secret: secret, isPassword: viaPassword)
        announceAdded(name, described: "\(described) at \(url)\(user.map { " as \($0)" } ?? "")", context)
        return ExitCode.ok
    }

    static func announceAdded(_ name: String, described: String, _ context: Context) {
        if let holder = DaemonLock.holder(context.layout) {
            kill(holder.pid, SIGHUP)  // the running daemon picks the server up without unmounting
            printOut("Added \(name): \(described). It appears under \(holder.mountpoint)/\(name) once its catalog is synced.")
        } else {
            printOut("Added \(name): \(described). Next: labstream mount MOUNTPOINT")
        }
    }

    /// Plex: a user token from the PIN flow (or stdin), then the server's own token and a
    /// connection that answers, found through plex.tv; `--url` with a server token skips
    /// plex.tv entirely.
    static func addPlex(_ args: Arguments, _ context: Context, name: String) throws -> Int32 {
        let viaPin = args.flag("--pin"), viaToken = args.flag("--token-stdin")
        guard viaPin != viaToken, !args.flag("--password-stdin") else {
            throw UsageError("a Plex server is added with exactly one of --pin or --token-stdin")
        }
        let config = try context.loadConfig()
        let transport = context.transport(config)
        let identity = context.identity()
        let plexTV = args.value("--plex-tv-url") ?? plexTV
        let url = args.value("--url")
        do {
            let userToken: String
            if viaPin {
                userToken = try PlexClient.pinLogin(plexTV: plexTV, identity: identity, transport: transport, pollInterval: 1) { pin in
                    printOut("To sign in, open https://plex.tv/link and enter the code \(pin.code). Waiting for approval…")
                }
            } else {
                userToken = readStdin()
                guard !userToken.isEmpty else { throw UsageError("nothing was read from standard input") }
            }
            let found: (url: String, token: String, machineId: String, name: String)
            if let url, viaToken {
                // A token for this server given directly: plex.tv is not needed.
                let checked: (machineId: String, version: String)
                do { checked = try PlexClient.check(url: url, token: userToken, identity: identity, transport: transport) } catch {
                    throw ProductProbe.naming(error, asked: .plex, url: url, identity: identity, transport: transport)
                }
                found = (PlexRequests(baseURL: url, identity: identity).baseURL, userToken, checked.machineId, name)
            } else {
                found = try PlexClient.discover(
                    plexTV: plexTV, userToken: userToken, serverName: args.value("--server"), url: url,
                    identity: identity, transport: transport)
                _ = try PlexClient.check(url: found.url, token: found.token, identity: identity, transport: transport)
            }
            let note = try record(
                LabstreamConfig.Server(name: name, kind: .plex, url: found.url, user: nil),
                CredentialStore.Entry(token: found.token, userId: "", serverId: found.machineId), context)
            announceAdded(name, described: "Plex server \(found.name) at \(found.url)\(note)", context)
        } catch let e as LabstreamError { throw CLIError(e) }
        return ExitCode.ok
    }

    /// Silo: device sign-in (the default: a code approved where the user is signed in), a
    /// password, or an API key (`sa_…`) on stdin; then the acting profile (`--profile`, else
    /// the primary). Only the refresh token (or the key) is stored, 0600.
    static func addSilo(_ args: Arguments, _ context: Context, name: String) throws -> Int32 {
        guard let url = args.value("--url") else { throw UsageError("server add silo needs --url URL (the server's base URL)") }
        let viaPassword = args.flag("--password-stdin"), viaToken = args.flag("--token-stdin")
        guard [viaPassword, viaToken, args.flag("--device")].filter({ $0 }).count <= 1 else {
            throw UsageError("give one of --device (the default), --user USER --password-stdin or --token-stdin")
        }
        if viaPassword && args.value("--user") == nil { throw UsageError("--password-stdin needs --user USER") }
        let config = try context.loadConfig()
        let transport = context.transport(config)
        let identity = context.identity()
        // Standard input holds the password or key (when asked for) on its first line, then the
        // profile's PIN (with --pin-stdin).
        let wantsPIN = args.flag("--pin-stdin")
        var lines = (viaToken || viaPassword || wantsPIN) ? readStdin().split(separator: "\n", omittingEmptySubsequences: false).map(String.init) : []
        let pin = wantsPIN ? lines.popLast() : nil
        if wantsPIN && (pin ?? "").isEmpty { throw UsageError("--pin-stdin: no PIN was read from standard input") }
        do {
            let requests: SiloRequests
            do { requests = try SiloClient.check(url: url, identity: identity, transport: transport) } catch {
                throw ProductProbe.naming(error, asked: .silo, url: url, identity: identity, transport: transport)
            }
            let secret: String, bearer: String
            if viaToken {
                secret = lines.first ?? ""
                guard !secret.isEmpty else { throw UsageError("nothing was read from standard input") }
                bearer = secret
            } else if viaPassword {
                let password = lines.first ?? ""
                guard !password.isEmpty else { throw UsageError("nothing was read from standard input") }
                let pair = try SiloClient.login(requests, user: args.value("--user")!, password: password, transport: transport)
                (secret, bearer) = (pair.refresh, pair.access)
            } else {
                let pair: SiloDecode.Tokens
                do {
                    pair = try SiloClient.deviceLogin(requests, transport: transport) { start in
                        let code = start.userCode.replacingOccurrences(of: "-", with: " ")
                        printOut(
                            "To sign in, open \(start.verificationURI) where you are signed in to Silo and enter the code \(code)"
                                + (start.verificationURIComplete.map { " (or open \($0))" } ?? "") + ". Waiting for approval…")
                    }
                } catch let ended as SiloClient.DeviceSignIn {
                    switch ended {
                    case .denied: throw CLIError(ExitCode.noPerm, "the sign-in was denied on the server; nothing was stored")
                    case .canceled: throw CLIError(ExitCode.tempFail, "the sign-in request was canceled; run the command again for a new code")
                    case .consumed: throw CLIError(ExitCode.tempFail, "the sign-in was collected by another request; run the command again")
                    case .expired: throw CLIError(ExitCode.tempFail, "the code expired before it was approved; run the command again for a new one")
                    }
                }
                (secret, bearer) = (pair.refresh, pair.access)
            }
            let (profile, profileToken) = try SiloClient.chooseProfile(requests, named: args.value("--profile"), pin: pin, bearer: bearer, transport: transport)
            // Silo tells a signed-in device no server id (`/api/v2/system/info` carries none by
            // design; only the approver's lookup of a device sign-in names one): the profile is
            // the identity told apart.
            let note = try record(
                LabstreamConfig.Server(name: name, kind: .silo, url: requests.serverBase, user: args.value("--user")),
                CredentialStore.Entry(token: secret, userId: profile.id, serverId: nil, profileToken: profileToken), context)
            announceAdded(name, described: "Silo server at \(requests.serverBase) as profile \(profile.name)\(note)", context)
        } catch let e as LabstreamError { throw CLIError(e) }
        return ExitCode.ok
    }

    /// Logs in (or checks a token), stores the credentials 0600 and writes the config section.
    /// Returns a description of the server.
    static func addMediaBrowser(
        _ flavor: MediaBrowserFlavor, _ context: Context, name: String, url: String, user: String?, secret: String,
        isPassword: Bool
    ) throws -> String {
        let config = try context.loadConfig()
        let transport = context.transport(config)
        let identity = context.identity()
        let entry: CredentialStore.Entry
        let described: String
        let base: String
        do {
            if isPassword {
                let (resolved, info, login) = try MediaBrowserClient.login(
                    flavor: flavor, url: url, user: user!, password: secret, identity: identity, transport: transport)
                entry = CredentialStore.Entry(token: login.token, userId: login.userId, serverId: info.serverId)
                described = "\(info.serverName) (\(flavor.product) \(info.version))"
                base = resolved
            } else {
                let (resolved, info, userId) = try MediaBrowserClient.adoptToken(
                    flavor: flavor, url: url, user: user, token: secret, identity: identity, transport: transport)
                entry = CredentialStore.Entry(token: secret, userId: userId, serverId: info.serverId)
                described = "\(info.serverName) (\(flavor.product) \(info.version))"
                base = resolved
            }
        } catch { throw CLIError(error) }
        let note = try record(LabstreamConfig.Server(name: name, kind: flavor.kind, url: base, user: user), entry, context)
        return described + note
    }

    /// Stores a sign-in under `server.name`. When the name held another identity (seed 002),
    /// what was tied to the old one is dropped or read again first (`IdentitySwitch`); returns
    /// what `server add` adds about that.
    static func record(_ server: LabstreamConfig.Server, _ entry: CredentialStore.Entry, _ context: Context) throws -> String {
        let before = try context.loadConfig().server(named: server.name)
        let stored: CredentialStore.Entry?
        do { stored = try context.credentials.load()[server.name] } catch { throw CLIError(error) }
        var change = IdentityChange.new
        if let before, let stored {
            change =
                before.kind != server.kind
                ? .otherServer
                : IdentityChange.between(
                    stored: ServerIdentity(serverId: stored.serverId, userId: stored.userId),
                    found: ServerIdentity(serverId: entry.serverId, userId: entry.userId))
        }
        var note = ""
        if let before, let stored, change.invalidates {
            let who =
                change == .otherServer
                ? "another server than the one stored (its id differs)" : "another \(server.kind == .silo ? "profile" : "user") than the one stored"
            printOut("\(server.name) now answers as \(who): reading its catalog again…")
            let log = Logger(level: .warning, command: true)
            do {
                let outcome = try IdentitySwitch.run(change, server: server, entry: entry, old: (before, stored), context: context, log: log)
                note = ". Signed in as \(who): \(outcome.summary)"
            } catch let e as CLIError { throw e } catch { throw CLIError(any: error) }
        }
        do {
            try makeDirectories(context.configDir)
            try context.credentials.set(server.name, entry)
        } catch { throw CLIError(error) }
        try saveServer(server, context)
        return note
    }

    static func saveServer(_ server: LabstreamConfig.Server, _ context: Context) throws {
        var config = try context.loadConfig()
        if let i = config.servers.firstIndex(where: { $0.name == server.name }) { config.servers[i] = server } else { config.servers.append(server) }
        do { try context.saveConfig(config) } catch { throw CLIError(error) }
    }

    /// An event channel's state, for a person.
    static func words(_ state: EventChannelState, now: Int64) -> String {
        switch state {
        case .open: return "events open"
        case .connecting: return "events connecting"
        case .lost(let failures, let retryAt, let why):
            return "events lost (\(why)), trying again in \(max(0, retryAt - now)) s" + (failures > 1 ? " (\(failures) failures in a row)" : "")
        case .none: return "no event channel"
        }
    }

    /// `2026-12-05 08:15` in local time.
    static func clock(_ epoch: Int64) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: Double(epoch)))
    }

    static func list(_ args: Arguments, _ context: Context) throws -> Int32 {
        let config = try context.loadConfig()
        let creds = (try? context.credentials.load()) ?? [:]
        // A read-only command creates nothing: no index, no data directory.
        let index = FileManager.default.fileExists(atPath: context.layout.indexPath) ? try? context.openIndex() : nil
        let stored = (try? index?.servers()) ?? []
        func leftOut(_ name: String) -> [(name: String, why: String)] { ((try? index?.leftOutLibraries(server: name)) ?? nil) ?? [] }
        let synced = Dictionary(stored.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        // A live daemon knows whether each server answers.
        let mountpoint = DaemonLock.holder(context.layout)?.mountpoint
        func reachability(_ name: String) -> String? {
            mountpoint.flatMap { StatusCommand.xattr($0 + "/" + name, "reachability") ?? StatusCommand.xattr($0, "reachability." + name) }
        }
        // Each server's event channel, and the periodic refresh behind it.
        func events(_ name: String) -> EventChannelState? {
            mountpoint.flatMap { StatusCommand.xattr($0, "events." + name) }.flatMap(EventChannelState.init(attribute:))
        }
        let nextRefresh = mountpoint.flatMap { StatusCommand.xattr($0, "next_refresh") }.flatMap { Int64($0) }
        if args.flag("--json") {
            let rows: [[String: Any]] = config.servers.map { s in
                var r: [String: Any] = ["name": s.name, "type": s.kind.rawValue, "url": s.url, "has_credentials": creds[s.name] != nil]
                if let u = s.user { r["user"] = u }
                // The identity the stored sign-in is (what a new sign-in under the name is compared with).
                if let id = creds[s.name]?.serverId, !id.isEmpty { r["server_id"] = id }
                if let id = creds[s.name]?.userId, !id.isEmpty { r[s.kind == .silo ? "profile_id" : "user_id"] = id }
                if let t = synced[s.name]?.lastSync { r["last_sync"] = t }
                r["reachability"] = reachability(s.name) ?? "not mounted"
                if reachability(s.name) == Reachability.authFailed.rawValue { r["sign_in_again"] = s.signInAgain }
                if let channel = events(s.name) { r.merge(channel.jsonFields) { _, new in new } }
                if let nextRefresh, mountpoint != nil { r["next_refresh"] = nextRefresh }
                let out = leftOut(s.name)
                if !out.isEmpty { r["left_out"] = out.map { ["library": $0.name, "why": $0.why] } }
                return r
            }
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
            return ExitCode.ok
        }
        if config.servers.isEmpty {
            printOut("No servers configured. Add one with: labstream server add jellyfin NAME --url URL --user USER --password-stdin")
            return ExitCode.ok
        }
        for s in config.servers {
            let sync =
                synced[s.name]?.lastSync.map { "last sync " + ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0))) } ?? "never synced"
            // Stored credentials the server refuses are not a sign-in: one state on the line.
            let refused = reachability(s.name) == Reachability.authFailed.rawValue
            let signIn = creds[s.name] == nil ? "no credentials" : refused ? "sign-in refused" : "signed in"
            var line = "\(s.name)\t\(s.kind.rawValue)\t\(s.url)\t\(s.user ?? "-")\t\(signIn)\t\(sync)\t\(reachability(s.name) ?? "not mounted")"
            if let state = events(s.name) { line += "\t" + Self.words(state, now: Int64(Date().timeIntervalSince1970)) }
            if mountpoint != nil {
                let planned = config.refreshInterval > 0 ? "refresh after start-up sync" : "no periodic refresh"
                line += "\t" + (nextRefresh.map { "next refresh " + Self.clock($0) } ?? planned)
            }
            printOut(line)
            if refused {
                printOut("  the server refused the stored sign-in; its transfers are paused until you sign in again: \(s.signInAgain)")
            }
            for library in leftOut(s.name) { printOut("  left out: \(library.name) (\(library.why))") }
        }
        return ExitCode.ok
    }

    static func remove(_ args: Arguments, _ context: Context) throws -> Int32 {
        guard args.positionals.count == 2 else { throw UsageError("usage: labstream server remove NAME [--delete-files]") }
        let deleteFiles = args.flag("--delete-files")
        let name = args.positionals[1]
        var config = try context.loadConfig()
        guard let server = config.server(named: name) else {
            throw CLIError.noSuchServer(name)
        }
        // A Silo sign-in is a session on the server: it is closed there too (best effort: an
        // unreachable server keeps it until it expires, and says so).
        var signedOut = ""
        if server.kind == .silo, let entry = (try? context.credentials.load())?[name] {
            let client = SiloClient(
                session: ServerSession(name: name, url: server.url, userId: entry.userId, token: entry.token, profileToken: entry.profileToken),
                identity: context.identity(), transport: context.transport(config))
            do {
                try client.logout()
                signedOut = " Signed out of the Silo server."
            } catch {
                signedOut =
                    " The Silo server could not be told to end the session (\(error.userMessage)); it ends when it expires, or revoke it in Silo's account settings."
            }
        }
        config.servers.removeAll { $0.name == name }
        // What it leaves on disk: its files with local bytes (none if it never downloaded).
        var kept: (files: Int, bytes: Int64) = (0, 0)
        var index: OfflineIndex?
        do {
            try context.saveConfig(config)
            try context.credentials.remove(name)
            if FileManager.default.fileExists(atPath: context.layout.indexPath) {
                let opened = try context.openIndex()
                index = opened
                for row in try opened.downloads() where row.key.server == name && !row.present.isEmpty {
                    kept = (kept.files + 1, kept.bytes + row.present.byteCount)
                }
                try opened.removeServer(name)
            }
        } catch let e as LabstreamError { throw CLIError(e) }
        let holder = DaemonLock.holder(context.layout)
        if deleteFiles, let index {
            // The daemon lets go of the files it has open before they are deleted.
            if holder == nil || (try ControlChannel.send(context.layout, .reclaim(server: name, paths: []))) == nil {
                do { try index.purgeServer(name, layout: context.layout) } catch { throw CLIError(error) }
            }
        }
        if let holder { kill(holder.pid, SIGHUP) }
        let files = kept.files == 1 ? "downloaded file" : "\(kept.files) downloaded files"
        printOut(
            "Removed \(name).\(signedOut)"
                + (kept.files == 0
                    ? ""
                    : deleteFiles
                        ? " Deleted its \(files) (\(ByteCount.text(kept.bytes)))."
                        : " Its \(files) (\(ByteCount.text(kept.bytes))) \(kept.files == 1 ? "stays" : "stay") on disk, listed by title in "
                            + "`labstream orphans`; `labstream orphans --purge` frees \(kept.files == 1 ? "it" : "them") (adding the server again and "
                            + "`labstream resume` continues \(kept.files == 1 ? "it" : "them"))."))
        return ExitCode.ok
    }
}

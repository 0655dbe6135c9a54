import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

enum ServerCommands {
    static let spec = Arguments.Spec(
        valued: Context.globalValued.union(["--url", "--user"]),
        flags: Context.globalFlags.union(["--password-stdin", "--token-stdin", "--json"]))

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
        let type = args.positionals[1], name = args.positionals[2]
        guard LabstreamConfig.supportedTypes.contains(type) else {
            throw UsageError("unsupported server type '\(type)'; supported: \(LabstreamConfig.supportedTypes.sorted().joined(separator: ", "))")
        }
        if let problem = LabstreamConfig.validateServerName(name) { throw UsageError(problem) }
        guard let url = args.value("--url") else { throw UsageError("server add needs --url URL") }
        guard url.hasPrefix("http://") || url.hasPrefix("https://"), !url.contains("@") else {
            throw UsageError("--url must be an http:// or https:// URL without credentials in it")
        }
        let user = args.value("--user")
        let viaPassword = args.flag("--password-stdin"), viaToken = args.flag("--token-stdin")
        guard viaPassword != viaToken else { throw UsageError("give exactly one of --password-stdin or --token-stdin") }
        if viaPassword && user == nil { throw UsageError("--password-stdin needs --user USER") }

        let secret = readStdin()
        guard !secret.isEmpty else { throw UsageError("nothing was read from standard input") }
        let described = try addJellyfin(context, name: name, url: url, user: user, secret: secret, isPassword: viaPassword)
        if let holder = DaemonLock.holder(context.layout) {
            kill(holder.pid, SIGHUP)   // the running daemon picks the server up without unmounting
            printOut("Added \(name): \(described) at \(url)\(user.map { " as \($0)" } ?? ""). It appears under \(holder.mountpoint)/\(name) once its catalog is synced.")
        } else {
            printOut("Added \(name): \(described) at \(url)\(user.map { " as \($0)" } ?? ""). Next: labstream mount MOUNTPOINT")
        }
        return ExitCode.ok
    }

    /// Logs in (or checks a token), stores the credentials 0600 and writes the config section.
    /// Returns a description of the server.
    static func addJellyfin(_ context: Context, name: String, url: String, user: String?, secret: String,
                            isPassword: Bool) throws -> String {
        var config = try context.loadConfig()
        let transport = context.transport(config)
        let identity = context.identity()
        let entry: CredentialStore.Entry
        let described: String
        do {
            if isPassword {
                let (info, login) = try JellyfinClient.login(url: url, user: user!, password: secret, identity: identity, transport: transport)
                entry = CredentialStore.Entry(token: login.token, userId: login.userId, serverId: info.serverId)
                described = "\(info.serverName) (Jellyfin \(info.version))"
            } else {
                let (info, userId) = try JellyfinClient.adoptToken(url: url, user: user, token: secret, identity: identity, transport: transport)
                entry = CredentialStore.Entry(token: secret, userId: userId, serverId: info.serverId)
                described = "\(info.serverName) (Jellyfin \(info.version))"
            }
            try makeDirectories(context.configDir)
            try context.credentials.set(name, entry)
        } catch { throw CLIError(error) }
        let server = LabstreamConfig.Server(name: name, type: "jellyfin", url: url, user: user)
        if let i = config.servers.firstIndex(where: { $0.name == name }) { config.servers[i] = server } else { config.servers.append(server) }
        do { try context.saveConfig(config) } catch { throw CLIError(error) }
        return described
    }

    static func list(_ args: Arguments, _ context: Context) throws -> Int32 {
        let config = try context.loadConfig()
        let creds = (try? context.credentials.load()) ?? [:]
        let synced = Dictionary(((try? context.openIndex().servers()) ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        // A live daemon knows whether each server answers.
        let mountpoint = DaemonLock.holder(context.layout)?.mountpoint
        func reachability(_ name: String) -> String? { mountpoint.flatMap { StatusCommand.xattr($0 + "/" + name, "reachability") } }
        if args.flag("--json") {
            let rows: [[String: Any]] = config.servers.map { s in
                var r: [String: Any] = ["name": s.name, "type": s.type, "url": s.url, "has_credentials": creds[s.name] != nil]
                if let u = s.user { r["user"] = u }
                if let t = synced[s.name]?.lastSync { r["last_sync"] = t }
                if let state = reachability(s.name) { r["reachability"] = state }
                return r
            }
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys, .prettyPrinted])
            printOut(String(decoding: data, as: UTF8.self))
            return ExitCode.ok
        }
        if config.servers.isEmpty {
            printOut("No servers configured. Add one with: labstream server add jellyfin NAME --url URL --user USER --password-stdin")
            return ExitCode.ok
        }
        for s in config.servers {
            let sync = synced[s.name]?.lastSync.map { "last sync " + ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0))) } ?? "never synced"
            printOut("\(s.name)\t\(s.type)\t\(s.url)\t\(s.user ?? "-")\t\(creds[s.name] == nil ? "no credentials" : "signed in")\t\(sync)\t\(reachability(s.name) ?? "not mounted")")
        }
        return ExitCode.ok
    }

    static func remove(_ args: Arguments, _ context: Context) throws -> Int32 {
        guard args.positionals.count == 2 else { throw UsageError("usage: labstream server remove NAME") }
        let name = args.positionals[1]
        var config = try context.loadConfig()
        guard config.server(named: name) != nil else {
            throw CLIError.noSuchServer(name)
        }
        config.servers.removeAll { $0.name == name }
        do {
            try context.saveConfig(config)
            try context.credentials.remove(name)
            if FileManager.default.fileExists(atPath: context.layout.indexPath) { try context.openIndex().removeServer(name) }
        } catch let e as LabstreamError { throw CLIError(e) }
        if let holder = DaemonLock.holder(context.layout) { kill(holder.pid, SIGHUP) }
        printOut("Removed \(name). Its downloaded bytes stay in \(context.layout.partialsDir) until you delete them.")
        return ExitCode.ok
    }
}

import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamHTTP
import LabstreamStore

/// Where Labstream keeps things for this invocation, and the loaded configuration.
public struct Context: Sendable {
    public let configDir: String
    public let dataDir: String
    public var configPath: String { configDir + "/labstream.conf" }
    public var credentialsPath: String { configDir + "/credentials" }
    public var layout: DataLayout { DataLayout(root: dataDir) }
    public var credentials: CredentialStore { CredentialStore(path: credentialsPath) }

    public init(configDir: String, dataDir: String) {
        self.configDir = configDir
        self.dataDir = dataDir
    }

    public func loadConfig() throws(CLIError) -> LabstreamConfig {
        guard let data = FileManager.default.contents(atPath: configPath) else { return LabstreamConfig() }
        do {
            return try LabstreamConfig.parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw CLIError(ExitCode.config, "\(configPath): \(error.description). Fix the file (see labstream.conf(5)).")
        }
    }

    public func saveConfig(_ config: LabstreamConfig) throws(LabstreamError) {
        try makeDirectories(configDir)
        try AtomicFile.write(config.serialized(), to: configPath, mode: 0o644)
    }

    /// A stable per-install device id for the `Authorization` header.
    public func identity() -> ClientIdentity {
        let path = dataDir + "/device-id"
        var id = (FileManager.default.contents(atPath: path)).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        if id.isEmpty {
            id = UUID().uuidString.lowercased()
            try? makeDirectories(dataDir)
            try? AtomicFile.write(id + "\n", to: path, mode: 0o600)
        }
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let hostname = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ClientIdentity(device: hostname, deviceId: id)
    }

    public func transport(_ config: LabstreamConfig) -> CurlTransport {
        CurlTransport(options: .init(connectTimeout: config.connectTimeout, stallTimeout: config.fetchTimeout))
    }

    /// A backend for every configured server that has credentials; the rest are reported.
    public func backends(_ config: LabstreamConfig, log: Logger) throws(CLIError) -> [any MediaBackend] {
        let creds: [String: CredentialStore.Entry]
        do { creds = try credentials.load() } catch { throw CLIError(error) }
        let transport = transport(config)
        let identity = identity()
        var out: [any MediaBackend] = []
        for server in config.servers {
            guard let entry = creds[server.name] else {
                log.warn("server \(server.name) has no stored credentials; add it again with `labstream server add`")
                continue
            }
            // A rotated secret (a Silo refresh token) is stored before it is used.
            let store = credentials, name = server.name
            let session = ServerSession(
                name: server.name, url: server.url, userId: entry.userId, token: entry.token,
                profileToken: entry.profileToken
            ) { rotated throws(LabstreamError) in
                var updated = entry
                updated.token = rotated
                try store.set(name, updated)
            }
            out.append(BackendRegistry.client(server.kind, session: session, identity: identity, transport: transport))
        }
        return out
    }

    public func openIndex() throws(CLIError) -> OfflineIndex {
        do {
            try makeDirectories(dataDir)
            // An index moved aside after damage: its last verified backup takes its place.
            _ = try OfflineIndex.restoreBackupIfMissing(indexPath: layout.indexPath)
            return try OfflineIndex(path: layout.indexPath)
        } catch { throw CLIError(error) }
    }
}

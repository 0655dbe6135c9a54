import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// A whole session with a known token, then every byte under the data and config dirs (bar the
/// credentials file) and every log line is searched for it.
@Suite(.serialized) struct SecretsTests {
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func noTokenOrPasswordLeavesTheCredentialStore(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("secrets-\(kind)", kind: kind)
        try m.mount()
        let rel = "test/Movies/Gamma/Gamma.mkv"
        #expect(try m.cli(["pin", "--wait", m.path(rel)]).code == 0)
        #expect(try m.cli(["status", "--json"]).code == 0)
        #expect(try m.cli(["sync"]).code == 0)
        m.fixture.inject(.status(401), pathPrefix: "/", times: 2)  // an error path through the logs too
        _ = try m.cli(["sync"])
        _ = try runProcess("/usr/bin/getfattr", ["-d", "-R", m.path("test")])
        try m.unmount()

        let secrets = [m.fixture.accessToken, "secret-pass"] + (m.plexTV.map { [$0.userToken] } ?? [])
        let credentials = m.configDir + "/credentials"
        let credentialText = try String(contentsOfFile: credentials, encoding: .utf8)
        #expect(credentialText.contains(m.fixture.accessToken))  // it is kept, here and only here
        var scanned = 0
        for file in (filesBelow(m.dataDir).map { m.dataDir + "/" + $0 } + filesBelow(m.configDir).map { m.configDir + "/" + $0 }) where file != credentials {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            for secret in secrets {
                #expect(data.range(of: Data(secret.utf8)) == nil, "\(secret.prefix(4))… found in \(file)")
            }
            scanned += 1
        }
        #expect(scanned >= 4)  // config, index, log, a partial at least
        #expect(!m.log.isEmpty)
    }
}

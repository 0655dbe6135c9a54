import LabstreamCore
import Testing

@Suite struct IdentityChangeTests {
    let alice = ServerIdentity(serverId: "srv1", userId: "alice")

    @Test func tellsAnotherUserFromAnotherServer() {
        #expect(IdentityChange.between(stored: nil, found: alice) == .new)
        #expect(IdentityChange.between(stored: alice, found: alice) == .same)
        #expect(IdentityChange.between(stored: alice, found: ServerIdentity(serverId: "srv1", userId: "bob")) == .otherUser)
        // Another server is that, whoever signed in.
        #expect(IdentityChange.between(stored: alice, found: ServerIdentity(serverId: "srv2", userId: "alice")) == .otherServer)
        #expect(IdentityChange.between(stored: alice, found: ServerIdentity(serverId: "srv2", userId: "bob")) == .otherServer)
    }

    @Test func anUnknownSideTellsNoChange() {
        // Silo gives no server id: only the profile can differ.
        let silo = ServerIdentity(serverId: nil, userId: "1")
        #expect(IdentityChange.between(stored: silo, found: ServerIdentity(serverId: nil, userId: "2")) == .otherUser)
        #expect(IdentityChange.between(stored: silo, found: silo) == .same)
        // Plex names no user; an older sign-in stored no server id (empty is unknown too).
        #expect(IdentityChange.between(stored: ServerIdentity(serverId: "m", userId: ""), found: ServerIdentity(serverId: "m", userId: "x")) == .same)
        #expect(IdentityChange.between(stored: ServerIdentity(serverId: nil, userId: "alice"), found: alice) == .same)
        #expect(!IdentityChange.same.invalidates && !IdentityChange.new.invalidates)
        #expect(IdentityChange.otherUser.invalidates && IdentityChange.otherServer.invalidates)
    }

    @Test func keepsOnlyCopiesTheNewIdentitySees() {
        let film = FileKey(server: "s", itemId: "film", sourceId: "f1")
        let episode = FileKey(server: "s", itemId: "ep", sourceId: "e1")
        let copy = FileKey(server: "s", itemId: "film", sourceId: "f1@10mbps")
        let stored = [film, episode, copy]
        let other = IdentityChange.otherUser.keeps(stored, visible: ["film", "unrelated"])
        #expect(other.keep == [film, copy] && other.drop == [episode])
        #expect(IdentityChange.otherServer.keeps(stored, visible: ["film", "ep"]) == ([], stored))
        #expect(IdentityChange.same.keeps(stored, visible: []) == (stored, []))
    }
}

@Suite struct ServerProductTests {
    @Test func readsWhichProductAnswered() {
        // Jellyfin's PublicSystemInfo (jellyfin-openapi.json): ProductName "Jellyfin Server".
        let jellyfin: Set<String> = ["LocalAddress", "ServerName", "Version", "ProductName", "OperatingSystem", "Id", "StartupWizardCompleted"]
        #expect(ServerProduct.mediaBrowser(productName: "Jellyfin Server", fields: jellyfin) == .jellyfin)
        // Emby 4.8's (emby-openapi.json): no ProductName, but its address lists.
        let emby: Set<String> = ["LocalAddress", "LocalAddresses", "RemoteAddresses", "ServerName", "Version", "Id"]
        #expect(ServerProduct.mediaBrowser(productName: nil, fields: emby) == .emby)
        #expect(ServerProduct.mediaBrowser(productName: "Emby Server", fields: ["Id"]) == .emby)
        // Only the shared fields: it cannot be told.
        #expect(ServerProduct.mediaBrowser(productName: nil, fields: ["Id", "ServerName", "Version"]) == nil)
        #expect(ServerProduct.mediaBrowser(productName: "Something Else", fields: jellyfin) == nil)
    }

    @Test func refusesAnotherProductNamingIt() {
        let refusal = ServerProduct.mismatch(asked: .jellyfin, found: .emby, at: "http://h:8096")
        #expect(refusal?.contains("answers as an Emby server, not Jellyfin") == true)
        #expect(refusal?.contains("server add emby") == true)
        #expect(ServerProduct.mismatch(asked: .silo, found: .plex, at: "u")?.contains("Plex") == true)
        #expect(ServerProduct.mismatch(asked: .emby, found: .emby, at: "u") == nil)
        #expect(ServerProduct.mismatch(asked: .emby, found: nil, at: "u") == nil)
        // Silo's Jellyfin-compatible API is a fallback a person may choose.
        #expect(ServerProduct.mismatch(asked: .jellyfin, found: .silo, at: "u") == nil)
    }
}

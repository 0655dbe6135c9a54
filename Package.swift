// swift-tools-version:6.0
import PackageDescription

// The pipeline, outermost last:
//   LabstreamCore (pure values and policies)
//   → LabstreamBackends (request builders + decoders, pure; transport injected)
//   → LabstreamHTTP (libcurl) · LabstreamStore (SQLite, partial files, credentials)
//   → LabstreamEngine (transfers; runs the labstream-probe helper, which alone links libmpv)
//   → LabstreamFS (filesystem engine, no FUSE)
//   → LabstreamDaemon (composition root, sync scheduler, typed API, control socket)
//   → LabstreamFUSE (the only importer of libfuse) → LabstreamCLI (+ LabstreamDemo) → labstream
let package = Package(
    name: "Labstream",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "labstream", targets: ["labstream"]),
        .executable(name: "labstream-probe", targets: ["labstream-probe"])
    ],
    targets: [
        .systemLibrary(name: "CFuse3", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CXXHash", pkgConfig: "libxxhash", providers: [.apt(["libxxhash-dev"])]),
        .systemLibrary(name: "CMpv", pkgConfig: "mpv", providers: [.apt(["libmpv-dev"])]),
        // Servers' event channels (Jellyfin/Emby WebSocket): Debian's libcurl 7.88 has no WebSocket.
        .systemLibrary(name: "CWebSockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),

        .target(name: "LabstreamCore"),
        .target(name: "LabstreamBackends", dependencies: ["LabstreamCore"]),
        .target(name: "LabstreamHTTP", dependencies: ["LabstreamCore", "LabstreamBackends", "CCurl", "CWebSockets"]),
        .target(name: "LabstreamStore", dependencies: ["LabstreamCore", "CSQLite", "CCrypto", "CXXHash", "CLinux"]),
        .target(name: "LabstreamEngine", dependencies: ["LabstreamCore", "LabstreamBackends", "LabstreamStore"]),
        // libmpv lives only in the probe helper, a process of its own (see labstream-probe).
        .target(name: "LabstreamProbe", dependencies: ["LabstreamCore", "CMpv"]),
        .target(name: "LabstreamFS", dependencies: ["LabstreamCore", "LabstreamEngine"]),
        .target(name: "LabstreamFUSE", dependencies: ["LabstreamCore", "LabstreamFS", "CFuse3"]),
        // The daemon: its composition root, sync scheduler, typed API and control socket.
        .target(
            name: "LabstreamDaemon",
            dependencies: ["LabstreamCore", "LabstreamBackends", "LabstreamHTTP", "LabstreamStore", "LabstreamEngine", "LabstreamFS", "CLinux"]),
        // `labstream demo`'s small Jellyfin-compatible server, its media and the loopback HTTP server.
        .target(name: "LabstreamDemo", dependencies: ["LabstreamCore"]),
        // What only tests and benchmarks use (never linked into `labstream`): the Jellyfin, Emby,
        // Plex and Silo emulators with their fault hooks, and the in-memory transport.
        .target(name: "LabstreamFixture", dependencies: ["LabstreamCore", "LabstreamDemo", "CCrypto"]),
        .target(name: "LabstreamTestSupport", dependencies: ["LabstreamCore", "LabstreamBackends", "LabstreamDemo", "LabstreamFixture"]),
        .target(
            name: "LabstreamCLI",
            dependencies: [
                "LabstreamCore", "LabstreamBackends", "LabstreamHTTP", "LabstreamStore",
                "LabstreamEngine", "LabstreamFS", "LabstreamFUSE", "LabstreamDaemon", "LabstreamDemo", "CLinux"
            ]),
        .executableTarget(name: "labstream", dependencies: ["LabstreamCLI"]),
        .executableTarget(name: "labstream-probe", dependencies: ["LabstreamProbe"]),
        // `make bench`'s library server (`labstream-fixture DIR`); built, never installed.
        .executableTarget(name: "labstream-fixture", dependencies: ["LabstreamCore", "LabstreamFixture", "LabstreamTestSupport"]),

        .testTarget(name: "LabstreamCoreTests", dependencies: ["LabstreamCore", "LabstreamBackends", "LabstreamFixture", "LabstreamTestSupport"]),
        .testTarget(
            name: "LabstreamIntegrationTests",
            dependencies: [
                "LabstreamCore", "LabstreamBackends", "LabstreamHTTP", "LabstreamStore",
                "LabstreamEngine", "LabstreamFS", "LabstreamDaemon", "LabstreamDemo", "LabstreamFixture", "LabstreamTestSupport", "LabstreamCLI",
                "CLinux"
            ], exclude: ["Specs"])
    ],
    swiftLanguageModes: [.v6]
)

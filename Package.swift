// swift-tools-version:6.0
import PackageDescription

/// The folder tree is the architecture: manifest -> planner -> engine / store -> Haul (orchestration) -> CLI.
/// C libraries come from the system through small system-library targets; only `HaulEngine` sees libcurl,
/// only the manifest reader sees libyaml, only `HaulDigest` sees libcrypto (`HaulSignature` checks signatures through
/// it), only `HaulArchive` sees libarchive.
let package = Package(
    name: "haul",
    products: [
        .executable(name: "haul", targets: ["HaulCommand"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // System libraries (apt providers named so SwiftPM can say what to install).
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLibYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CLibArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),
        .systemLibrary(name: "CLinuxShims"),

        // Libraries, in the order data flows through them.
        .target(name: "HaulThreads"),
        .target(name: "HaulFailures"),
        .target(name: "HaulFileSystem", dependencies: ["HaulFailures", "CLinuxShims"]),
        .target(name: "HaulDigest", dependencies: ["CLibCrypto"]),
        .target(name: "HaulSignature", dependencies: ["HaulDigest"]),
        .target(
            name: "HaulManifest",
            dependencies: ["HaulDigest", "HaulSignature", "HaulThreads", "HaulFileSystem", "CLibYAML"]
        ),
        .target(name: "HaulPlanner", dependencies: ["HaulManifest", "HaulDigest", "HaulFailures"]),
        .target(
            name: "HaulStore",
            dependencies: [
                "HaulManifest", "HaulDigest", "HaulThreads", "HaulFailures", "HaulFileSystem", "CLinuxShims",
            ]),
        .target(
            name: "HaulEngine", dependencies: ["HaulDigest", "HaulThreads", "HaulFailures", "HaulFileSystem", "CCurl"]),
        .target(
            name: "HaulArchive",
            dependencies: ["HaulManifest", "HaulFailures", "HaulFileSystem", "HaulDigest", "CLibArchive"]),
        .target(
            name: "Haul",
            dependencies: [
                "HaulManifest", "HaulPlanner", "HaulStore", "HaulEngine", "HaulArchive", "HaulDigest",
                "HaulThreads", "HaulFailures", "HaulFileSystem", "HaulSignature",
            ]),
        .executableTarget(
            name: "HaulCommand",
            dependencies: [
                "Haul", "HaulManifest", "HaulPlanner", "HaulStore", "HaulEngine", "HaulArchive", "HaulFailures",
                "HaulFileSystem", "HaulDigest", "HaulSignature", "HaulThreads",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // Tests. `HaulTestSupport` is real code too: a loopback HTTP server the tests start and stop.
        .target(name: "CPageCacheProbe", path: "Tests/CPageCacheProbe"),
        .target(name: "HaulTestSupport", dependencies: ["CPageCacheProbe"], path: "Tests/HaulTestSupport"),
        .testTarget(name: "HaulDigestTests", dependencies: ["HaulDigest"]),
        .testTarget(name: "HaulSignatureTests", dependencies: ["HaulSignature", "HaulDigest", "HaulTestSupport"]),
        .testTarget(name: "HaulManifestTests", dependencies: ["HaulManifest", "HaulTestSupport"]),
        .testTarget(
            name: "HaulPlannerTests", dependencies: ["HaulPlanner", "HaulManifest", "HaulDigest", "HaulFailures"]),
        .testTarget(
            name: "HaulTests",
            dependencies: [
                "Haul", "HaulPlanner", "HaulManifest", "HaulEngine", "HaulDigest", "HaulStore", "HaulFailures",
                "HaulSignature",
                "HaulTestSupport",
            ]),
        .testTarget(
            name: "HaulStoreTests",
            dependencies: [
                "HaulStore", "HaulCommand", "HaulManifest", "HaulDigest", "HaulFailures", "HaulFileSystem",
                "HaulTestSupport",
            ]),
        .testTarget(
            name: "HaulArchiveTests",
            dependencies: [
                "HaulArchive", "HaulCommand", "HaulManifest", "HaulDigest", "HaulFileSystem",
                "HaulTestSupport",
            ]),
        .testTarget(
            name: "HaulEngineTests", dependencies: ["HaulEngine", "HaulDigest", "HaulFileSystem", "HaulTestSupport"]),
        // The fast tier is every test target but this one, whose tests run the built `haul` (scripts/test-fast.sh).
        .testTarget(
            name: "HaulCommandTests", dependencies: ["HaulCommand", "HaulTestSupport", "HaulDigest", "HaulManifest"]),
        .testTarget(
            name: "HaulCommandValueTests",
            dependencies: [
                "HaulCommand", "Haul", "HaulDigest", "HaulEngine", "HaulFailures", "HaulFileSystem", "HaulManifest",
                "HaulPlanner", "HaulStore",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

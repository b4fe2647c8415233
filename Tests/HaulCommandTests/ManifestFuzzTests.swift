import Foundation
import Glibc
import HaulDigest
import HaulTestSupport
import XCTest

/// Hundreds of mutated manifests through the real binary: haul must answer each with one of the statuses it
/// documents, within a memory ceiling, and leave everything outside its root exactly as it was, however the
/// manifest tries to reach out (`..`, absolute paths, symlinked folders, `.haul`, huge or deeply nested values,
/// control bytes).
///
/// Two sets each run: a fixed one (the same manifests every time, from one seed) and one from a seed of its own
/// (`HAUL_FUZZ_SEED`, hexadecimal, else the clock's), so that runs explore different manifests over time. A
/// failure names the seed and the manifest's number; `HAUL_FUZZ_SEED=<seed>` runs that set again.
///
/// Root is pinned by a quoted `root:` line before the mutated text (a second `root:` is a duplicate key, and
/// nothing can continue a quoted scalar), so whatever the mutations do, the tree a sync may write is known.
final class ManifestFuzzTests: XCTestCase {
    private static let fixedSeed: UInt64 = 0x6861_756C_2D66_757A  // "haul-fuz"
    /// Per set: as many `plan`s again follow the `sync`s.
    private static let syncs = 150
    /// The rotating set's seed: `HAUL_FUZZ_SEED`, else the clock's nanoseconds.
    private static var rotatingSeed: UInt64 {
        if let text = ProcessInfo.processInfo.environment["HAUL_FUZZ_SEED"], let seed = UInt64(text, radix: 16) {
            return seed
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) &* 1_000_000_007 &+ UInt64(now.tv_nsec)
    }
    /// Far above what any of these manifests needs (a few MiB), far below what a runaway would take.
    private static let memoryLimitKiB = 1 << 20

    func testMutatedManifestsGetADocumentedAnswerWithinBoundsAndNeverTouchAnythingOutsideRoot() throws {
        let sandbox = try TemporaryDirectory(prefix: "haul-fuzz")
        let work = sandbox.path("work")
        try FileManager.default.createDirectory(atPath: work + "/out", withIntermediateDirectories: true)
        try sandbox.write("outside/precious.txt", "must survive")
        try sandbox.write("out-evil/precious.txt", "must survive too")
        try sandbox.write("work/notes.txt", "beside the manifest")
        XCTAssertEqual(symlink(sandbox.path("outside"), work + "/out/link"), 0)
        XCTAssertEqual(symlink(sandbox.path("out-evil"), work + "/out/evil"), 0)

        let bodies = [
            "a": Array("alpha\n".utf8), "b": Array("bravo\n".utf8), "c": [UInt8](repeating: 0x63, count: 70_000),
        ]
        let server = try LoopbackHTTPServer(
            files: Dictionary(uniqueKeysWithValues: bodies.map { ("/" + $0.key, $0.value) }))
        defer { server.stop() }
        let seeds = Self.seedManifests(server: server, bodies: bodies)

        var outsideRoot = Self.snapshotOutsideRoot(sandbox: sandbox.path)
        for seed in [Self.fixedSeed, Self.rotatingSeed] {
            try fuzz(seed: seed, seeds: seeds, work: work, sandbox: sandbox, outsideRoot: &outsideRoot)
        }
    }

    private func fuzz(
        seed: UInt64, seeds: [String], work: String, sandbox: TemporaryDirectory,
        outsideRoot: inout TreeSnapshot
    ) throws {
        var generator = SplitMix(seed: seed)
        for number in 0..<(2 * Self.syncs) {
            let command = number < Self.syncs ? "sync" : "plan"
            let seedText = seeds[Int(generator.next() % UInt64(seeds.count))]
            let mutated = Self.mutate(Array(seedText.utf8), rounds: 1 + Int(generator.next() % 4), using: &generator)
            let manifest = Array("version: 1\nroot: \"./out\"\n".utf8) + mutated
            try Data(manifest).write(to: URL(fileURLWithPath: work + "/haul.yaml"))

            let result = try ProcessRunner.run(
                "/bin/sh",
                [
                    "-c", "ulimit -v \(Self.memoryLimitKiB); exec \"$0\" \"$@\"", HaulProcess.executablePath,
                    command, "haul.yaml", "--progress", "none",
                ] + (command == "sync" ? ["--jobs", "4"] : []),
                currentDirectory: work, timeout: 60)
            let allowed: Set<Int32> = command == "sync" ? [0, 1, 3] : [0, 2, 3]
            let description =
                "seed \(String(seed, radix: 16)), manifest #\(number) (\(command)): exit \(result.exitCode)\n\(String(decoding: manifest, as: UTF8.self))\n--- stderr ---\n\(result.stderr.prefix(2000))"
            XCTAssertTrue(allowed.contains(result.exitCode), description)
            if result.exitCode == 3 {
                XCTAssertTrue(result.stderr.contains("error:"), "a refused manifest says why: \(description)")
            }
            let now = Self.snapshotOutsideRoot(sandbox: sandbox.path)
            if now != outsideRoot {
                XCTFail("something outside root changed after \(description)\nbefore:\n\(outsideRoot)\nafter:\n\(now)")
                outsideRoot = now
            }
            if testRun?.failureCount ?? 0 > 20 { return }
        }
    }

    /// Everything but `work/out` (root) and the manifest itself.
    private static func snapshotOutsideRoot(sandbox: String) -> TreeSnapshot {
        var snapshot = TreeSnapshot(sandbox)
        snapshot.removeAll { $0 == "work/out" || $0.hasPrefix("work/out/") || $0 == "work/haul.yaml" }
        return snapshot
    }

    private static func seedManifests(server: LoopbackHTTPServer, bodies: [String: [UInt8]]) -> [String] {
        func sha(_ name: String) -> String { StreamingHasher.digest(bodies[name] ?? [], algorithm: .sha256).hex }
        return [
            """
            files:
              - url: \(server.url("/a"))
                dest: a.txt
                sha256: \(sha("a"))
              - url: \(server.url("/b"))
                dest: sub/b.txt
                sha256: \(sha("b"))
                mirrors: [\(server.url("/a"))]
            """,
            """
            defaults: { retries: 0, timeout: 2s, mode: "0644", headers: { X-Test: "1" } }
            prune: true
            files:
              - { url: \(server.url("/c")), dest: link/c.bin, size: 70000, sha256: \(sha("c")) }
              - { url: \(server.url("/a")), dest: evil/a.txt }
              - { url: \(server.url("/b")), dest: "caf\\u00e9/b.txt" }
            """,
            """
            files:
              - url: \(server.url("/a"))
                dest: deep/er/and/deeper/a.txt
                checksum: sha256:\(sha("a"))
              - url: \(server.url("/missing"))
                dest: gone.txt
              - url: \(server.url("/b"))
                dest: ./x/../b.txt
            """,
        ]
    }

    /// Tokens that probe the rules: escapes, haul's own folder, references, YAML structure, odd bytes.
    private static let tokens: [String] = [
        "..", "../", "/", "/etc/", "../../outside/", ".haul/", ".haul", "link/", "evil/", "${HOME}", "${NOPE}", "${",
        "{", "}", "[", "]", ":", ": ", "- ", "&a ", "*a", "!!binary ", "|", ">", "#", "\"", "'", "\\", "\n", "\n  ",
        "\t", "\u{0}", "\u{1B}[2J", "\r", "\u{202E}", "e\u{301}", "%", "~", "null", "true", "-1",
        "99999999999999999999",
        "0x10", "1e9", "sha512:", "sha256-", "mode: \"4755\"", "size: 1", "timeout: 0s", "retries: 9999",
        "dest: ", "url: ", "mirrors: ", "headers: ", "root: /", "version: 2",
        String(repeating: "a", count: 300), String(repeating: "a/", count: 2500), String(repeating: "[", count: 200),
        String(repeating: "- ", count: 100), "http://127.0.0.1:1/", "file:///etc/passwd", "ftp://x/",
    ]

    private static func mutate(_ input: [UInt8], rounds: Int, using generator: inout SplitMix) -> [UInt8] {
        var bytes = input
        for _ in 0..<rounds {
            let position = bytes.isEmpty ? 0 : Int(generator.next() % UInt64(bytes.count + 1))
            switch generator.next() % 6 {
            case 0:  // flip a byte
                if position < bytes.count { bytes[position] ^= UInt8(truncatingIfNeeded: 1 << (generator.next() % 8)) }
            case 1, 2:  // insert a token
                bytes.insert(contentsOf: Array(tokens[Int(generator.next() % UInt64(tokens.count))].utf8), at: position)
            case 3:  // delete a run
                let count = min(bytes.count - position, Int(generator.next() % 24))
                if count > 0 { bytes.removeSubrange(position..<(position + count)) }
            case 4:  // duplicate a line (a key twice, an entry twice)
                let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                guard !lines.isEmpty else { continue }
                let index = Int(generator.next() % UInt64(lines.count))
                var out = lines.map(Array.init)
                out.insert(out[index], at: index)
                bytes = Array(out.joined(separator: [UInt8(ascii: "\n")]))
            default:  // replace a value's end with a token
                guard let colon = bytes[position...].firstIndex(of: UInt8(ascii: ":")) else { continue }
                let end = bytes[colon...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
                bytes.replaceSubrange(
                    (colon + 1)..<end, with: Array((" " + tokens[Int(generator.next() % UInt64(tokens.count))]).utf8))
            }
        }
        return bytes
    }
}

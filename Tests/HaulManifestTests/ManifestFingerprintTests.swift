import Foundation
import HaulManifest
import XCTest

/// `ManifestFingerprint`: the digest of everything validation reads changes with each of those things and with
/// nothing else, and the root found without validating is the one validation resolves (or the manifest's folder,
/// a guess the snapshot's own root then confirms or refutes).
final class ManifestFingerprintTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("haul-fingerprint-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/project", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ text: String, to name: String = "project/haul.yaml") throws -> String {
        let path = directory + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private let manifest = """
        version: 1
        root: ${DATA:-out}
        files:
          - url: https://${HOST}/a.bin
            dest: a.bin
            sha256: \(String(repeating: "ab", count: 32))
        """

    /// The fingerprint the loader gives a manifest read with `environment` (and `root`, `headers`).
    private func fingerprint(
        _ path: String, _ environment: [String: String], root: String? = nil,
        headers: Set<String> = []
    ) throws -> ManifestFingerprint {
        let input = try ManifestLoader.read(path: path, root: root)
        let loaded = try ManifestLoader.load(input, environment: environment, commandLineHeaders: headers)
        XCTAssertEqual(loaded.environmentNames, ["DATA", "HOST"], "the variables validation consulted")
        let recomputed = ManifestFingerprint.of(
            input, variables: loaded.environmentNames, environment: environment,
            commandLineHeaders: headers)
        XCTAssertEqual(recomputed, loaded.fingerprint, "computed again from the input and the names alone")
        return try XCTUnwrap(loaded.fingerprint)
    }

    func testTheFingerprintChangesWithEveryInputOfValidationAndWithNothingElse() throws {
        let path = try write(manifest)
        let base = try fingerprint(path, ["HOST": "example.com"])
        XCTAssertEqual(base.path, path)
        XCTAssertEqual(
            try fingerprint(path, ["HOST": "example.com", "UNRELATED": "x"]), base,
            "a variable the manifest does not name does not count")
        XCTAssertNotEqual(try fingerprint(path, ["HOST": "example.org"]), base, "a named variable's value")
        XCTAssertNotEqual(
            try fingerprint(path, ["HOST": "example.com", "DATA": "out"]), base,
            "set to what its default gives is still another input")
        XCTAssertNotEqual(
            try fingerprint(path, ["HOST": "example.com", "DATA": ""]), base, "set but empty is not unset")
        XCTAssertNotEqual(
            try fingerprint(path, ["HOST": "example.com"], root: directory + "/elsewhere"), base, "--root")
        XCTAssertNotEqual(try fingerprint(path, ["HOST": "example.com"], headers: ["Authorization"]), base, "-H names")
        _ = try write(manifest + "\n# a comment\n")
        XCTAssertNotEqual(try fingerprint(path, ["HOST": "example.com"]), base, "any byte of the file")
        _ = try write(manifest)
        XCTAssertEqual(try fingerprint(path, ["HOST": "example.com"]), base, "the same bytes again")
        let copy = try write(manifest, to: "copy.yaml")
        XCTAssertNotEqual(
            try fingerprint(copy, ["HOST": "example.com", "DATA": "project/out"]), base,
            "the same bytes elsewhere are another manifest")
    }

    /// A manifest file is read again by each pass (the settled check's hash, then validation), from the file
    /// opened first: the fingerprint is always that of the text validated. Rewritten in place between the passes,
    /// the new text is validated and fingerprinted; replaced by a rename, the file opened first still is.
    func testTheFingerprintIsThatOfTheTextValidatedWhenTheFileChangesBetweenPasses() throws {
        let environment = ["HOST": "example.com"]
        let edited = manifest.replacingOccurrences(of: "dest: a.bin", with: "dest: b.bin")
        let path = try write(manifest)
        let original = try fingerprint(path, environment)

        let hashedFirst = try ManifestLoader.read(path: path)
        XCTAssertEqual(
            ManifestFingerprint.of(
                hashedFirst, variables: ["DATA", "HOST"], environment: environment,
                commandLineHeaders: []), original)
        _ = try write(edited)
        let rewritten = try ManifestLoader.load(hashedFirst, environment: environment)
        XCTAssertEqual(rewritten.files.map(\.destination.description), ["b.bin"])
        XCTAssertEqual(rewritten.fingerprint, try fingerprint(path, environment))
        XCTAssertNotEqual(rewritten.fingerprint, original)

        _ = try write(manifest)
        let opened = try ManifestLoader.read(path: path)
        XCTAssertEqual(
            ManifestFingerprint.of(
                opened, variables: ["DATA", "HOST"], environment: environment,
                commandLineHeaders: []), original)
        let replacement = try write(edited, to: "project/replacement.yaml")
        XCTAssertEqual(rename(replacement, path), 0)
        let kept = try ManifestLoader.load(opened, environment: environment)
        XCTAssertEqual(kept.files.map(\.destination.description), ["a.bin"])
        XCTAssertEqual(kept.fingerprint, original)
    }

    /// Standard input cannot be read again by a later run: it has no fingerprint.
    func testAManifestWithoutAFileOfItsOwnHasNoFingerprint() throws {
        let input = ManifestInput(
            bytes: Array(manifest.utf8), fileName: "<stdin>", directory: directory, path: nil,
            overridingRoot: nil)
        XCTAssertNil(try ManifestLoader.load(input, environment: ["HOST": "h"]).fingerprint)
    }

    /// The root found by reading only up to `files:` is the one validation resolves; written after `files:`, or
    /// not at all, the guess is the manifest's folder.
    func testTheDeclaredRootIsTheValidatedOneOrTheManifestsFolder() throws {
        let entry = "  - {url: \"https://e.com/a\", dest: a}\n"
        let cases: [(text: String, environment: [String: String], expected: String)] = [
            ("version: 1\nroot: ../out\nfiles:\n" + entry, [:], directory + "/out"),
            ("root: \"${DATA}/x\"\nversion: 1\nfiles:\n" + entry, ["DATA": "/srv"], "/srv/x"),
            (
                "version: 1\ndefaults: {retries: 2, headers: {X-A: b}}\nroot: 'sub/./dir'\nfiles:\n" + entry, [:],
                directory + "/project/sub/dir"
            ),
            (
                "{version: 1, root: flow, files: [{url: \"https://e.com/a\", dest: a}]}\n", [:],
                directory + "/project/flow"
            ),
            ("version: 1\nfiles:\n" + entry + "root: after\n", [:], directory + "/project"),
            ("version: 1\nfiles:\n" + entry, [:], directory + "/project"),
        ]
        for (text, environment, expected) in cases {
            let path = try write(text)
            let input = try ManifestLoader.read(path: path)
            XCTAssertEqual(ManifestFingerprint.declaredRoot(input, environment: environment), expected, text)
            let validated = try ManifestLoader.load(input, environment: environment).root
            if !text.contains("root: after") { XCTAssertEqual(validated, expected, text) }
        }
        let overridden = try ManifestLoader.read(path: try write(cases[0].text), root: directory + "/cli")
        XCTAssertEqual(ManifestFingerprint.declaredRoot(overridden, environment: [:]), directory + "/cli")
        let unset = try ManifestLoader.read(path: try write("version: 1\nroot: ${NOPE}\nfiles: []\n"))
        XCTAssertNil(
            ManifestFingerprint.declaredRoot(unset, environment: [:]), "no guess from a root that cannot expand")
    }
}

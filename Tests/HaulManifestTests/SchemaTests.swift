import Foundation
import HaulManifest
import HaulTestSupport
import XCTest

/// The published JSON Schema agrees with the loader: same text as embedded, same keys, same verdict on examples.
final class SchemaTests: XCTestCase {
    /// The repository root, from this file's path (`Tests/HaulManifestTests/SchemaTests.swift`).
    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    static var schemaPath: String { repositoryRoot + "/schema/haul-manifest.schema.json" }

    func testSchemaFileIsTheEmbeddedText() throws {
        let file = try Data(contentsOf: URL(fileURLWithPath: Self.schemaPath))
        XCTAssertEqual(
            Array(file), Array(ManifestSchema.json.utf8),
            "schema/haul-manifest.schema.json and ManifestSchema.json differ")
    }

    func testSchemaPropertiesAreTheLoadersKeys() throws {
        let schema = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(ManifestSchema.json.utf8)) as? [String: Any])
        func resolve(_ node: Any?) throws -> [String: Any] {
            let object = try XCTUnwrap(node as? [String: Any])
            guard let reference = object["$ref"] as? String else { return object }
            let prefix = "#/$defs/"
            XCTAssertTrue(reference.hasPrefix(prefix), reference)
            let definitions = try XCTUnwrap(schema["$defs"] as? [String: Any])
            return try resolve(definitions[String(reference.dropFirst(prefix.count))])
        }
        func propertyNames(_ object: [String: Any]) throws -> Set<String> {
            XCTAssertEqual(object["additionalProperties"] as? Bool, false)
            return Set(try XCTUnwrap(object["properties"] as? [String: Any]).keys)
        }
        let topProperties = try XCTUnwrap(schema["properties"] as? [String: Any])
        XCTAssertEqual(try propertyNames(schema), ManifestSchema.topLevelKeys)
        XCTAssertEqual(try propertyNames(resolve(topProperties["defaults"])), ManifestSchema.defaultsKeys)
        let files = try resolve(topProperties["files"])
        let file = try resolve(files["items"])
        XCTAssertEqual(try propertyNames(file), ManifestSchema.fileKeys)
        let extract = try XCTUnwrap((file["properties"] as? [String: Any])?["extract"] as? [String: Any])
        let extractForms = try XCTUnwrap(extract["oneOf"] as? [Any])
        XCTAssertEqual(extractForms.count, 2, "a boolean or a mapping")
        XCTAssertEqual(try propertyNames(resolve(extractForms[1])), ManifestSchema.extractKeys)
        let list = try resolve(try XCTUnwrap(topProperties["lists"] as? [String: Any])["additionalProperties"])
        XCTAssertEqual(try propertyNames(list), ManifestSchema.listKeys)
        let keys = try XCTUnwrap((list["properties"] as? [String: Any])?["keys"] as? [String: Any])
        let keyForms = try XCTUnwrap((keys["items"] as? [String: Any])?["oneOf"] as? [Any])
        XCTAssertEqual(try propertyNames(resolve(keyForms[1])), ManifestSchema.listKeyEntryKeys)
        let from = try XCTUnwrap((file["properties"] as? [String: Any])?["from"] as? [String: Any])
        let fromForms = try XCTUnwrap(from["oneOf"] as? [Any])
        XCTAssertEqual(try propertyNames(resolve(fromForms[1])), ManifestSchema.listPinKeys)

        XCTAssertEqual(
            ManifestSchema.topLevelKeys, ["version", "root", "defaults", "prune", "netrc", "files", "lists", "$schema"])
        XCTAssertEqual(ManifestSchema.defaultsKeys, ["retries", "timeout", "mode", "headers", "retry_on"])
        XCTAssertEqual(
            ManifestSchema.fileKeys,
            [
                "url", "dest", "sha256", "sha384", "sha512", "checksum", "integrity",
                "size", "mirrors", "mode", "retries", "timeout", "refresh", "headers",
                "extract", "cert", "key", "from", "retry_on",
            ])
        XCTAssertEqual(ManifestSchema.listKeys, ["url", "signature", "keys", "refresh"])
        XCTAssertEqual(ManifestSchema.listKeyEntryKeys, ["key", "retired"])
        XCTAssertEqual(ManifestSchema.listPinKeys, ["list", "name"])
        XCTAssertEqual(ManifestSchema.extractKeys, ["format", "strip", "include", "exclude", "tree", "max_unpacked"])
        XCTAssertEqual(schema["$schema"] as? String, "https://json-schema.org/draft/2020-12/schema")
        XCTAssertEqual(schema["$id"] as? String, "https://haul.dev/schema/manifest-v1.json")
    }

    /// Every `examples/**/haul.yaml` loads and validates against the schema. The design requires at least one example.
    func testRepositoryExamples() throws {
        let examples = Self.yamlFiles(under: Self.repositoryRoot + "/examples")
        guard !examples.isEmpty else {
            XCTFail(
                "no examples/**/haul.yaml found under \(Self.repositoryRoot)/examples; the design requires at least one"
            )
            return
        }
        try checkAgreement(valid: examples, invalid: [])
    }

    /// The same pipeline on manifests written here, valid and invalid, so the check itself is known to work.
    func testLoaderAndSchemaAgree() throws {
        let directory = try TemporaryDirectory(prefix: "haul-schema")
        let write = manifestWriter(in: directory)
        let full = try write("full", ValidManifestTests.yaml)
        let minimal = try write("minimal", "version: 1\nfiles: []\n")
        // As README sets a manifest up for an editor: the language server's comment, and the schema named by key.
        let named = try write(
            "named-schema",
            "# yaml-language-server: $schema=./haul-manifest.schema.json\n"
                + "$schema: ./haul-manifest.schema.json\nversion: 1\nfiles: []\n")
        let forms = try write(
            "forms",
            """
            version: 1
            files:
              - url: ${HAUL_EXAMPLE_BASE}/a
                dest: ./a/b.txt
                mode: 0755
                timeout: 60
              - {url: "http://[::1]:8080/x", dest: x, mode: "0o640", timeout: 1.5, checksum: "sha1:a9993e364706816aba3e25717850c26c9cd0d89d"}
              - {url: "http://[::1]:8080/y", dest: y, timeout: 1ms}
              - {url: "http://[::1]:8080/z", dest: z, timeout: 0.001}
              - {url: "http://[::1]:8080/w", dest: w, timeout: "0.001s"}
              - {url: "http://[::1]:8080/v", dest: v, integrity: "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0= sha384-OLBgp1GsljhM2TJ+sbHjaiH9txEUvgdDTAzHv2P24donTt6/529l+9Ua0vFImLlb?ct=text/plain"}
              - {url: "https://e.com/sdk.tar.gz", dest: sdk/, extract: true}
              - {url: "https://e.com/plain.tar.gz", dest: plain.tar.gz, extract: false, mode: "0600"}
              - url: https://e.com/download?id=7
                dest: toolchain
                sha256: \(Fixture.sha256)
                extract:
                  format: tar.zst
                  strip: 1
                  include: "bin/*"
                  exclude: ["**/*.a", docs/]
                  tree: sha256-n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=
                  max_unpacked: 2G
              - {url: "https://e.com/a.zip", dest: az, extract: {format: 7z, max_unpacked: 1048576, include: []}}
              - {url: "https://e.com/b.zip", dest: b/, extract: {}}

            """)
        let entry = { (line: String) in "version: 1\nfiles:\n  - {url: \"https://e.com/a\", dest: a, \(line)}\n" }
        // Each invalid manifest with the schema location that must reject it (so it fails for the intended reason).
        let invalid: [(path: String, schemaPath: String)] = [
            (
                try write(
                    "two-checksums",
                    entry(
                        "sha256: \(Fixture.sha256), integrity: \"sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=\"")
                ), "files/0"
            ),
            (try write("unknown-key", entry("sah256: x")), "files/0"),
            (try write("entry-schema", entry("$schema: x")), "files/0"),
            (try write("short-digest", entry("sha256: \(Fixture.sha256.dropLast())")), "files/0/sha256"),
            (try write("ftp", "version: 1\nfiles:\n  - {url: \"ftp://e.com/a\", dest: a}\n"), "files/0/url"),
            (
                try write(
                    "absolute-dest", entry("mode: \"0644\"").replacingOccurrences(of: "dest: a", with: "dest: /a")),
                "files/0/dest"
            ),
            (
                try write(
                    "dotdot-dest", entry("mode: \"0644\"").replacingOccurrences(of: "dest: a", with: "dest: a/../../b")),
                "files/0/dest"
            ),
            (
                try write(
                    "haul-dest", entry("mode: \"0644\"").replacingOccurrences(of: "dest: a", with: "dest: .haul/x")),
                "files/0/dest"
            ),
            (try write("version-2", "version: 2\nfiles: []\n"), "version"),
            (try write("no-files", "version: 1\n"), ""),
            (try write("zero-timeout", entry("timeout: 0s")), "files/0/timeout"),
            (try write("sub-millisecond-timeout", entry("timeout: 0.5ms")), "files/0/timeout"),
            (try write("sub-millisecond-seconds", entry("timeout: 0.0009")), "files/0/timeout"),
            (
                try write(
                    "long-name",
                    entry("mode: \"0644\"").replacingOccurrences(
                        of: "dest: a", with: "dest: a/\(String(repeating: "n", count: 256))")), "files/0/dest"
            ),
            (
                try write(
                    "long-path",
                    entry("mode: \"0644\"").replacingOccurrences(
                        of: "dest: a", with: "dest: \(Array(repeating: "n", count: 2049).joined(separator: "/"))")),
                "files/0/dest"
            ),
            (try write("retries", entry("retries: 101")), "files/0/retries"),
            (try write("mode", entry("mode: \"0800\"")), "files/0/mode"),
            (try write("negative-size", entry("size: -1")), "files/0/size"),
            (try write("bad-header", entry("headers: {\"Bad Name\": x}")), "files/0/headers"),
            (
                try write("bad-integrity", entry("integrity: \"sha1-qZk+NkcGgWq6PiVxeFDCbJzQ2J0=\"")),
                "files/0/integrity"
            ),
            (try write("checksum-prefix", entry("checksum: \"sha3:abcd\"")), "files/0/checksum"),
            (try write("defaults-dest", "version: 1\ndefaults: {dest: x}\nfiles: []\n"), "defaults"),
            (try write("defaults-extract", "version: 1\ndefaults: {extract: true}\nfiles: []\n"), "defaults"),
            (
                try write(
                    "folder-dest-of-a-file",
                    entry("extract: false").replacingOccurrences(of: "dest: a", with: "dest: a/")), "files/0/dest"
            ),
            (try write("extract-mode", entry("extract: true, mode: \"0755\"")), "files/0"),
            (try write("extract-number", entry("extract: 1")), "files/0/extract"),
            (try write("extract-key", entry("extract: {stirp: 1}")), "files/0/extract"),
            (try write("extract-format", entry("extract: {format: rar}")), "files/0/extract"),
            (try write("extract-strip", entry("extract: {strip: -1}")), "files/0/extract"),
            (try write("extract-empty-pattern", entry("extract: {include: \"\"}")), "files/0/extract"),
            (try write("extract-pattern-list", entry("extract: {exclude: [ok, {a: b}]}")), "files/0/extract"),
            (
                try write("extract-tree", entry("extract: {tree: \"sha512-\(String(repeating: "A", count: 86))==\"}")),
                "files/0/extract"
            ),
            (try write("extract-max-unpacked", entry("extract: {max_unpacked: 2X}")), "files/0/extract"),
            (try write("extract-zero", entry("extract: {max_unpacked: 0}")), "files/0/extract"),
        ]
        try checkAgreement(valid: [full, minimal, named, forms], invalid: invalid)
    }

    /// Writes `NAME.yaml` in `directory`; its path.
    private func manifestWriter(in directory: TemporaryDirectory) -> (String, String) throws -> String {
        { name, text in
            try directory.write(name + ".yaml", text)
            return directory.path(name + ".yaml")
        }
    }

    /// `lists:` and `from:`: the loader and the schema accept the same valid manifest, and both refuse a list or a
    /// `from:` the schema can judge (a digest beside `from:`, no keys, a misspelt signature, a bad day, a name with
    /// `/`, `from:` under `defaults:`).
    func testLoaderAndSchemaAgreeOnSignedLists() throws {
        let directory = try TemporaryDirectory(prefix: "haul-schema")
        let write = manifestWriter(in: directory)
        let valid = try write("lists", SignedListManifestTests.valid)
        let list = { (body: String) in
            "version: 1\nfiles:\n  - {url: \"https://e.com/a\", dest: a, from: l}\nlists:\n  l: {\(body)}\n"
        }
        let keys = "url: \"https://e.com/SUMS\", keys: [k.pub]"
        let invalid: [(path: String, schemaPath: String)] = [
            (
                try write(
                    "from-and-sha256",
                    list(keys).replacingOccurrences(of: "from: l}", with: "from: l, sha256: \(Fixture.sha256)}")),
                "files/0"
            ),
            (try write("no-keys", list("url: \"https://e.com/SUMS\", keys: []")), "lists/l/keys"),
            (try write("no-url", list("keys: [k.pub]")), "lists/l"),
            (try write("signature", list(keys + ", signature: clearsign")), "lists/l/signature"),
            (
                try write("retired", list("url: \"https://e.com/SUMS\", keys: [{key: k.pub, retired: 30/06/2026}]")),
                "lists/l/keys/0"
            ),
            (try write("list-key", list(keys + ", refesh: 1h")), "lists/l"),
            (
                try write(
                    "slash-name",
                    list(keys).replacingOccurrences(of: "  l: {", with: "  a/b: {").replacingOccurrences(
                        of: "from: l}", with: "from: a/b}")), "lists"
            ),
            (
                try write(
                    "from-mapping",
                    list(keys).replacingOccurrences(of: "from: l}", with: "from: {list: l, nmae: a}}")), "files/0/from"
            ),
            (
                try write(
                    "defaults-from", list(keys).replacingOccurrences(of: "files:", with: "defaults: {from: l}\nfiles:")),
                "defaults"
            ),
        ]
        try checkAgreement(valid: [valid], invalid: invalid)
    }

    // MARK: Helpers

    static func yamlFiles(under path: String) -> [String] {
        let directory = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        return enumerator.compactMap { $0 as? String }
            // Manifests by their conventional name; the recipes hold other YAML too (CI workflows, Kubernetes
            // objects, haul's config file).
            .filter { $0 == "haul.yaml" || $0.hasSuffix("/haul.yaml") || $0.hasSuffix(".haul.yaml") }
            .map { directory + "/" + $0 }
            .sorted()
    }

    /// Every `${NAME}` a file references, set to a value that keeps a URL valid.
    static func environment(for text: String) -> [String: String] {
        var environment: [String: String] = ["HAUL_EXAMPLE_BASE": "http://127.0.0.1:1"]
        var rest = Substring(text)
        while let start = rest.firstRange(of: "${"), let end = rest[start.upperBound...].firstIndex(of: "}") {
            let name = String(rest[start.upperBound..<end])
            let looksLikeURL = name.hasSuffix("BASE") || name.hasSuffix("URL") || name.hasSuffix("MIRROR")
            if environment[name] == nil { environment[name] = looksLikeURL ? "http://127.0.0.1:1" : "example-value" }
            rest = rest[rest.index(after: end)...]
        }
        return environment
    }

    private func checkAgreement(
        valid: [String], invalid: [(path: String, schemaPath: String)],
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let invalidPaths = invalid.map(\.path)
        for path in valid + invalidPaths {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            do {
                _ = try ManifestLoader.load(path: path, environment: Self.environment(for: text))
                XCTAssertTrue(valid.contains(path), "loader accepted \(path)", file: file, line: line)
            } catch {
                XCTAssertTrue(invalidPaths.contains(path), "loader rejected \(path):\n\(error)", file: file, line: line)
            }
        }
        let verdicts = try Self.schemaErrors(for: valid + invalidPaths)
        for path in valid {
            XCTAssertEqual(verdicts[path], [], "schema rejected \(path)", file: file, line: line)
        }
        for (path, schemaPath) in invalid {
            let errors = verdicts[path] ?? []
            XCTAssertTrue(
                errors.contains { $0.hasPrefix(schemaPath + ": ") },
                "schema did not reject \(path) at \"\(schemaPath)\": \(errors)", file: file, line: line)
        }
    }

    /// Validates with python3's jsonschema (Draft 2020-12) after loading each file with PyYAML.
    static func schemaErrors(for paths: [String]) throws -> [String: [String]] {
        let script = """
            import json, sys, yaml, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema)
            result = {}
            for path in sys.argv[2:]:
                with open(path) as f:
                    document = yaml.safe_load(f)
                result[path] = sorted("/".join(map(str, e.absolute_path)) + ": " + e.message for e in validator.iter_errors(document))
            print(json.dumps(result))
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, schemaPath] + paths
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            XCTFail("python3 jsonschema check failed (status \(process.terminationStatus)):\n\(errorText)")
            return [:]
        }
        let decoded = try JSONSerialization.jsonObject(with: data) as? [String: [String]]
        return try XCTUnwrap(decoded, "unexpected output: \(String(decoding: data, as: UTF8.self))")
    }
}

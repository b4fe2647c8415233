@testable import HaulManifest
import XCTest

/// `lists:` (signed checksum lists) and an entry's `from:` as the validator reads them: the model they become, and
/// each mistake with its place.
final class SignedListManifestTests: XCTestCase {
    /// A minisign public key's line and an SSH Ed25519 public key line, made by `minisign -G` and `ssh-keygen`.
    static let minisignKey = "RWQbKNuiYN4bSAWq5QsG3/tVY+WXNE2qJsncWJvY+uMS9SvSTMYOe60E"
    static let sshKey =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL2KZsa3or4GRA3gYzbP+B3ur3dQTZ2xN9WO7MEX8eU0 release@example.org"

    static let valid = """
        version: 1
        files:
          - url: https://example.org/nightly/tool-linux.tar.gz?token=1#top
            dest: bin/tool.tar.gz
            from: nightly
          - url: https://mirror.example/t.tgz
            dest: t.tgz
            from: {list: nightly, name: tool-linux.tar.gz}
          - url: ${LIST_BASE}/sdk%2B1.tar.gz
            dest: sdk
            size: 1024
            from: signed
            extract: {strip: 1}
          - {url: "https://example.org/a.tgz", dest: a.tgz, from: {list: clear}}
        lists:
          nightly:
            url: https://example.org/nightly/SHA256SUMS
            keys:
              - \(minisignKey)
              - \(sshKey)
              - keys/release.gpg
              - {key: ../shared/old.pub, retired: 2026-06-30}
              - {retired: 2000-02-29, key: /etc/haul/leap.pub}
            refresh: 1h
          signed:
            url: ${LIST_BASE}/SHA256SUMS
            signature: ${LIST_BASE}/SHA256SUMS.minisig
            keys: ["\(minisignKey)"]
          clear:
            url: https://example.org/SHA256SUMS.asc
            signature: clearsigned
            keys: [keys/release.gpg]
        defaults: {retries: 1}

        """

    /// Every value of the model as written: inline keys as they are, files resolved against the manifest's folder,
    /// the retirement day's end as seconds (2026-07-01T00:00:00Z, 2000-03-01T00:00:00Z), each file's name in its
    /// list from the URL (before `?` and `#`, percent-decoded) or as given; a pinned digest nowhere.
    func testAValidManifestBecomesExactlyTheModel() throws {
        let environment = ["LIST_BASE": "https://lists.example/v2", "UNUSED": "x"]
        let loaded = try XCTUnwrap(Fixture.manifest(Self.valid, environment: environment))
        XCTAssertEqual(loaded.warningLines, [])
        let base = TemplatedString(
            template: "${LIST_BASE}/SHA256SUMS", expanded: "https://lists.example/v2/SHA256SUMS")
        XCTAssertEqual(
            loaded.lists,
            [
                SignedListSource(
                    name: "nightly", url: TemplatedString(literal: "https://example.org/nightly/SHA256SUMS"),
                    signature: .auto,
                    keys: [
                        ListKey(key: Self.minisignKey, isFile: false),
                        ListKey(key: Self.sshKey, isFile: false),
                        ListKey(key: "/work/project/keys/release.gpg", isFile: true),
                        ListKey(key: "/work/shared/old.pub", isFile: true, retiredAfter: 1_782_864_000),
                        ListKey(key: "/etc/haul/leap.pub", isFile: true, retiredAfter: 951_868_800),
                    ],
                    refresh: Seconds(3600), location: SourceLocation(line: 16, column: 3)),
                SignedListSource(
                    name: "signed", url: base,
                    signature: .url(
                        TemplatedString(
                            template: "${LIST_BASE}/SHA256SUMS.minisig",
                            expanded: "https://lists.example/v2/SHA256SUMS.minisig")),
                    keys: [ListKey(key: Self.minisignKey, isFile: false)],
                    location: SourceLocation(line: 25, column: 3)),
                SignedListSource(
                    name: "clear", url: TemplatedString(literal: "https://example.org/SHA256SUMS.asc"),
                    signature: .clearSigned, keys: [ListKey(key: "/work/project/keys/release.gpg", isFile: true)],
                    location: SourceLocation(line: 29, column: 3)),
            ])
        XCTAssertEqual(
            loaded.files.map(\.listPin),
            [
                ListPin(list: "nightly", name: "tool-linux.tar.gz"),
                ListPin(list: "nightly", name: "tool-linux.tar.gz"),
                ListPin(list: "signed", name: "sdk+1.tar.gz"),
                ListPin(list: "clear", name: "a.tgz"),
            ])
        // The list gives the digest at each sync: nothing is pinned when the manifest is read, so nothing that takes
        // only pinned entries (the head start, `add --update-all`) takes these.
        XCTAssertEqual(loaded.files.map { $0.checksum == nil }, [true, true, true, true])
        XCTAssertEqual(loaded.files.map(\.isPinned), [false, false, false, false])
        XCTAssertEqual(loaded.files[2].extract?.strip, 1)
        XCTAssertEqual(loaded.files[2].size, 1024)
        XCTAssertEqual(loaded.files.map(\.retries), [1, 1, 1, 1])
        XCTAssertEqual(loaded.environmentNames, ["LIST_BASE"])
    }

    /// Each mistake in `lists:`, with its place and key path; a key that starts as an inline one is read as one.
    func testMistakesInListsAreEachReportedWhereTheyAre() {
        let yaml = """
            version: 1
            files:
              - {url: "https://e.org/a", dest: a, from: bad}
            lists:
              "": {url: "https://e.org/a", keys: [k.pub]}
              a/b: {url: "https://e.org/a", keys: [k.pub]}
              bad:
                url: ftp://e.org/SHA256SUMS
                signature: clearsign
                keys: []
                refesh: 1h
              nokeys:
                url: https://e.org/SUMS
                signature: SUMS.sig
                refresh: 0s
              keys:
                url: https://e.org/SUMS
                keys:
                  - RWQbKNuiYN4bSAWq5QsG3/tVY+WXNE2qJsncWJvY+uMS9SvSTMYOe6
                  - RWQbKNuiYN4bSAWq5QsG3/tVY+WXNE2qJsncWJvY+uMS9SvS.pub
                  - ssh-rsa AAAAB3NzaC1yc2E= rsa@example.org
                  - {key: k.pub, retired: 2026-02-29}
                  - {key: k.pub, retired: 30/06/2026}
                  - {retired: 2026-06-30}
                  - {key: k.pub, retierd: 2026-06-30}
                  - ""
                  - [k.pub]
              nourl: {keys: k.pub}
              bad: {url: "https://e.org/a", keys: [k.pub]}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:5:3: error: lists: a list's name must not be empty",
                "haul.yaml:6:3: error: lists: a list's name must not contain \"/\", found \"a/b\"",
                "haul.yaml:8:10: error: lists.bad.url: unsupported URL scheme \"ftp\" (haul fetches http and https)",
                "haul.yaml:9:16: error: lists.bad.signature: expected auto, clearsigned or the signature's URL, found "
                    + "\"clearsign\"; did you mean \"clearsigned\"?",
                "haul.yaml:10:11: error: lists.bad.keys: expected at least one key the list's signature may be made by",
                "haul.yaml:11:5: error: lists.bad.refesh: unknown key \"refesh\"; did you mean \"refresh\"?",
                "haul.yaml:12:3: error: lists.nokeys: missing required key \"keys\" (the keys the list's signature may "
                    + "be made by)",
                "haul.yaml:14:16: error: lists.nokeys.signature: expected auto, clearsigned or the signature's URL, "
                    + "found \"SUMS.sig\"",
                "haul.yaml:15:14: error: lists.nokeys.refresh: must be greater than zero, found \"0s\"",
                "haul.yaml:19:9: error: lists.keys.keys[0]: not a minisign or signify public key: its base64 does not "
                    + "decode",
                "haul.yaml:20:9: error: lists.keys.keys[1]: not a minisign or signify public key: its base64 does not "
                    + "decode (a key file's name that starts so is written "
                    + "\"./RWQbKNuiYN4bSAWq5QsG3/tVY+WXNE2qJsncWJvY+uMS9SvS.pub\")",
                "haul.yaml:21:9: error: lists.keys.keys[2]: not an SSH public key: \"ssh-rsa\" keys are not supported "
                    + "(ssh-ed25519 and ecdsa-sha2-nistp256, -nistp384 and -nistp521 are)",
                "haul.yaml:22:31: error: lists.keys.keys[3].retired: there is no such day as \"2026-02-29\"",
                "haul.yaml:23:31: error: lists.keys.keys[4].retired: expected a date as YYYY-MM-DD, such as "
                    + "\"2026-06-30\", found \"30/06/2026\"",
                "haul.yaml:24:9: error: lists.keys.keys[5]: missing required key \"key\"",
                "haul.yaml:25:22: error: lists.keys.keys[6].retierd: unknown key \"retierd\"; did you mean \"retired\"?",
                "haul.yaml:26:9: error: lists.keys.keys[7]: expected a key or a key file's path, found an empty string",
                "haul.yaml:27:9: error: lists.keys.keys[8]: expected a key, a key file's path or a mapping, found a "
                    + "sequence",
                "haul.yaml:28:3: error: lists.nourl: missing required key \"url\"",
                "haul.yaml:28:17: error: lists.nourl.keys: expected a list of keys (each a key, a key file's path or "
                    + "{key: …, retired: …}), found \"k.pub\"",
                "haul.yaml:29:3: error: lists.bad: duplicate key \"bad\" (first on line 7)",
            ])
    }

    /// Each mistake of an entry's `from:`, wherever `lists:` stands; `from:` is no default.
    func testMistakesInFromAreEachReportedWhereTheyAre() {
        let yaml = """
            version: 1
            defaults: {from: nightly}
            files:
              - url: https://e.org/a.tgz
                dest: a
                sha256: \(Fixture.sha256)
                from: nightly
              - {url: "https://e.org/b", dest: b, from: nighty}
              - {url: "https://e.org/dir/?name=c", dest: c, from: nightly}
              - {url: "https://e.org/d", dest: d, from: {name: d}}
              - {url: "https://e.org/e", dest: e, from: {list: nightly, nmae: e}}
              - {url: "https://e.org/f", dest: f, from: [nightly]}
              - {url: "https://e.org/g", dest: g, from: other}
              - {url: "https://e.org/h", dest: h, from: {list: nightly, name: ""}}
              - {url: "https://e.org/i", dest: i, from: ""}
              - {url: "https://e.org", dest: j, from: nightly, integrity: "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="}
            lists:
              nightly: {url: "https://e.org/SHA256SUMS", keys: [k.pub]}

            """
        XCTAssertEqual(
            Fixture.diagnostics(yaml),
            [
                "haul.yaml:2:12: error: defaults.from: unknown key \"from\"; defaults can set only retries, timeout, "
                    + "retry_on, mode and headers",
                "haul.yaml:7:5: error: files[0].from: conflicts with sha256 (line 6): an entry that takes its digest "
                    + "from a list pins none of its own",
                "haul.yaml:8:45: error: files[1].from: no list named \"nighty\"; did you mean \"nightly\"?",
                "haul.yaml:9:55: error: files[2].from: the URL \"https://e.org/dir/?name=c\" ends in no file name: "
                    + "give the file's name in the list, as from: {list: nightly, name: …}",
                "haul.yaml:10:45: error: files[3].from: missing required key \"list\"",
                "haul.yaml:11:61: error: files[4].from.nmae: unknown key \"nmae\"; did you mean \"name\"?",
                "haul.yaml:12:45: error: files[5].from: expected a list's name, or a mapping of list and name, found "
                    + "a sequence",
                "haul.yaml:13:45: error: files[6].from: no list named \"other\" (lists: has \"nightly\")",
                "haul.yaml:14:67: error: files[7].from.name: expected a file's name in the list, found an empty string",
                "haul.yaml:15:45: error: files[8].from: expected a list's name, found an empty string",
                "haul.yaml:16:37: error: files[9].from: conflicts with integrity (line 16): an entry that takes its "
                    + "digest from a list pins none of its own",
                "haul.yaml:16:43: error: files[9].from: the URL \"https://e.org\" ends in no file name: give the file's "
                    + "name in the list, as from: {list: nightly, name: …}",
            ])
    }

    func testFromWithoutListsSaysThereAreNone() {
        XCTAssertEqual(
            Fixture.diagnostics(Fixture.entry("url: https://e.org/a", "dest: a", "from: nightly")),
            ["haul.yaml:5:11: error: files[0].from: no list named \"nightly\" (the manifest has no lists:)"])
    }

    /// A list no entry names is a warning, not an error: its signature would be checked for nothing.
    func testAListNoEntryUsesIsAWarning() throws {
        let yaml = """
            version: 1
            lists:
              used: {url: "https://e.org/SUMS", keys: [k.pub]}
              spare: {url: "https://e.org/OTHER", keys: [k.pub]}
            files:
              - {url: "https://e.org/a", dest: a, from: used}

            """
        let manifest = try XCTUnwrap(Fixture.manifest(yaml))
        XCTAssertEqual(
            manifest.warningLines,
            ["haul.yaml:4:3: warning: lists.spare: no entry takes its digests from this list (from: spare)"])
        XCTAssertEqual(manifest.lists.map(\.name), ["used", "spare"])
    }

    /// A shard keeps every list: which of its entries name which list is the sync's to find out.
    func testAShardKeepsTheLists() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(Self.valid, environment: ["LIST_BASE": "https://lists.example/v2"]))
        for index in 1...4 {
            let restricted = manifest.restricted(to: try XCTUnwrap(Shard(index: index, count: 4)))
            XCTAssertEqual(restricted.lists, manifest.lists)
            XCTAssertLessThan(restricted.files.count, manifest.files.count)
        }
    }

    func testRetirementDates() throws {
        XCTAssertEqual(try SignedListRules.retirementDate("1970-01-01"), 86_400)
        XCTAssertEqual(try SignedListRules.retirementDate("2024-02-29"), 1_709_251_200)
        XCTAssertEqual(try SignedListRules.retirementDate("1969-12-31"), 0)
        for bad in ["2023-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "2026-6-30", "20260630", "2026-06-30Z"] {
            XCTAssertThrowsError(try SignedListRules.retirementDate(bad), bad)
        }
    }

    func testTheNameInTheListIsTheURLsLastSegment() {
        XCTAssertEqual(SignedListRules.fileName(inURL: "https://e.org/a/b/tool.tgz?x=/y#z/w"), "tool.tgz")
        XCTAssertEqual(SignedListRules.fileName(inURL: "https://e.org/tool%20x%2btar.gz"), "tool x+tar.gz")
        XCTAssertEqual(SignedListRules.fileName(inURL: "https://e.org/a%2Fb"), "a%2Fb", "a decoded / is no name")
        XCTAssertEqual(SignedListRules.fileName(inURL: "https://e.org/%ff.bin"), "%ff.bin", "not UTF-8 once decoded")
        XCTAssertNil(SignedListRules.fileName(inURL: "https://e.org/dir/"))
        XCTAssertNil(SignedListRules.fileName(inURL: "https://e.org"))
        XCTAssertNil(SignedListRules.fileName(inURL: "https://e.org?a/b"))
    }
}

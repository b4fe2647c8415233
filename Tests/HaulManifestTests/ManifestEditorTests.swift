import HaulDigest
import HaulManifest
import XCTest

/// `ManifestEditor`: the entry lands after the last entry of `files:`, in the manifest's own style, and every
/// other byte stays where it was. Each edited text is also loaded back to prove it is a valid manifest that
/// holds exactly the pinned entry.
final class ManifestEditorTests: XCTestCase {
    private let hex = Fixture.sha256
    private var digest: Digest { Digest(algorithm: .sha256, hex: hex)! }
    private var entry: PinnedEntry {
        PinnedEntry(url: "https://example.com/v2/new.bin", destination: "new.bin", digest: digest, size: 4096)
    }

    /// The edited text, after checking that it loads and that the new entry reads back as pinned.
    private func edit(
        _ text: String, _ pinned: PinnedEntry? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> String {
        try edit(text, adding: [pinned ?? entry], file: file, line: line)
    }

    /// The same with several entries, which must read back in order at the end of `files:`.
    private func edit(
        _ text: String?, adding entries: [PinnedEntry], file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> String {
        let result = try ManifestEditor.appending(entries, to: text.map { Array($0.utf8) }, fileName: Fixture.fileName)
        let edited = String(decoding: result.bytes, as: UTF8.self)
        if let manifest = Fixture.manifest(edited, file: file, line: line) {
            XCTAssertEqual(manifest.files.count, result.firstIndex + entries.count, file: file, line: line)
            XCTAssertTrue(
                zip(manifest.files.suffix(entries.count), entries).allSatisfy { $1.matches($0) },
                "the new entries read back as pinned:\n\(edited)", file: file, line: line)
        }
        return edited
    }

    private func editError(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ManifestEditError? {
        do {
            _ = try ManifestEditor.appending([entry], to: Array(text.utf8), fileName: Fixture.fileName)
            XCTFail("expected the edit to be refused", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Block sequences

    func testCommentedManifestKeepsEveryCommentAndGainsTheEntryAfterTheLastOne() throws {
        let original = """
            # Assets for the build. Keep sorted by dest.
            version: 1   # format version
            root: ./assets

            defaults:
              retries: 5   # flaky CDN

            files:
              # The toolchain.
              - url: https://example.com/v1.2/tool.tar.gz   # mirrored below
                dest: bin/tool.tar.gz
                sha256: \(hex)
                mirrors:
                  - https://mirror.example.org/tool.tar.gz
                # mode: "0755"   (not yet)

              # - url: https://example.com/old.bin   (retired)
              #   dest: old.bin

            # Trailing notes stay at the end.

            """
        XCTAssertEqual(
            try edit(original),
            """
            # Assets for the build. Keep sorted by dest.
            version: 1   # format version
            root: ./assets

            defaults:
              retries: 5   # flaky CDN

            files:
              # The toolchain.
              - url: https://example.com/v1.2/tool.tar.gz   # mirrored below
                dest: bin/tool.tar.gz
                sha256: \(hex)
                mirrors:
                  - https://mirror.example.org/tool.tar.gz
                # mode: "0755"   (not yet)
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096

              # - url: https://example.com/old.bin   (retired)
              #   dest: old.bin

            # Trailing notes stay at the end.

            """)
    }

    func testIndentationIsCopiedFromTheLastEntry() throws {
        let deep = "version: 1\nfiles:\n    -   url: https://e.com/a\n        dest: a\n"
        XCTAssertEqual(
            try edit(deep),
            deep + """
                    -   url: https://example.com/v2/new.bin
                        dest: new.bin
                        sha256: \(hex)
                        size: 4096

                """)
        let indentless = "version: 1\nfiles:\n- url: https://e.com/a\n  dest: a\n"
        XCTAssertEqual(
            try edit(indentless),
            indentless + """
                - url: https://example.com/v2/new.bin
                  dest: new.bin
                  sha256: \(hex)
                  size: 4096

                """)
    }

    func testTopLevelKeysAndCommentsAfterFilesStayAfterTheNewEntry() throws {
        let original = """
            version: 1
            files:
              - url: https://e.com/a
                dest: a
                headers:
                  X-Team: data   # who to ask
            # Pruning is off until the migration ends.
            prune: false
            defaults:
              timeout: 60s
            """
        XCTAssertEqual(
            try edit(original),
            """
            version: 1
            files:
              - url: https://e.com/a
                dest: a
                headers:
                  X-Team: data   # who to ask
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096
            # Pruning is off until the migration ends.
            prune: false
            defaults:
              timeout: 60s
            """)
    }

    func testOneLineFlowEntriesGetAOneLineFlowEntry() throws {
        let original =
            "version: 1\nfiles:\n  - {url: https://e.com/a, dest: a}  # first\n  - {url: https://e.com/b, dest: b}\n"
        XCTAssertEqual(
            try edit(original),
            original
                + "  - {url: \"https://example.com/v2/new.bin\", dest: new.bin, sha256: \(hex), size: 4096}\n")
    }

    func testLiteralBlockScalarAsTheLastValue() throws {
        let original =
            "version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a\n    headers:\n      X-Note: |-\n        line one\n\n  # about the next entry\nprune: false\n"
        XCTAssertEqual(
            try edit(original),
            "version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a\n    headers:\n      X-Note: |-\n        line one\n\n"
                + "  - url: https://example.com/v2/new.bin\n    dest: new.bin\n    sha256: \(hex)\n    size: 4096\n"
                + "  # about the next entry\nprune: false\n")
    }

    // MARK: Line endings and encodings

    func testCRLFManifestGetsCRLFLines() throws {
        let original = "version: 1\r\nfiles:\r\n  - url: https://e.com/a\r\n    dest: a\r\n# end\r\n"
        XCTAssertEqual(
            try edit(original),
            "version: 1\r\nfiles:\r\n  - url: https://e.com/a\r\n    dest: a\r\n"
                + "  - url: https://example.com/v2/new.bin\r\n    dest: new.bin\r\n    sha256: \(hex)\r\n    size: 4096\r\n# end\r\n"
        )
    }

    func testMissingFinalNewlineIsSupplied() throws {
        XCTAssertEqual(
            try edit("version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a  # last"),
            """
            version: 1
            files:
              - url: https://e.com/a
                dest: a  # last
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096

            """)
    }

    /// libyaml counts positions in characters; the splice is in bytes. Multi-byte text before the insertion point
    /// (and a byte order mark) must not shift it.
    func testByteOrderMarkAndMultibyteTextBeforeTheInsertionPoint() throws {
        let head =
            "\u{feff}# Données — größere Dateien 📦 " + String(repeating: "ä", count: 40) + "\nversion: 1\nfiles:\n"
            + "  - url: https://e.com/ü\n    dest: \"été/ça.csv\"\n"
        let tail = "prune: false\n# ünd so weiter\n"
        XCTAssertEqual(
            try edit(head + tail),
            head
                + "  - url: https://example.com/v2/new.bin\n    dest: new.bin\n    sha256: \(hex)\n    size: 4096\n"
                + tail)
    }

    // MARK: files: that is not (yet) a block sequence

    func testEmptyFlowSequenceBecomesABlockSequenceKeepingItsComment() throws {
        XCTAssertEqual(
            try edit("version: 1\nfiles: []   # none yet\nprune: false\n"),
            """
            version: 1
            files:   # none yet
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096
            prune: false

            """)
        XCTAssertEqual(
            try edit("version: 1\nfiles: []"),
            """
            version: 1
            files:
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096

            """)
    }

    func testFlowSequenceGainsAFlowItem() throws {
        XCTAssertEqual(
            try edit("version: 1\nfiles: [{url: https://e.com/a, dest: a}]  # inline\n"),
            "version: 1\nfiles: [{url: https://e.com/a, dest: a}, {url: \"https://example.com/v2/new.bin\", "
                + "dest: new.bin, sha256: \(hex), size: 4096}]  # inline\n")
        XCTAssertEqual(
            try edit("version: 1\nfiles: [\n    {url: https://e.com/a, dest: a},\n]\n"),
            "version: 1\nfiles: [\n    {url: https://e.com/a, dest: a},\n    {url: \"https://example.com/v2/new.bin\", "
                + "dest: new.bin, sha256: \(hex), size: 4096},\n]\n")
    }

    func testNullFilesGetsABlockSequence() throws {
        let expected = """
            version: 1
            files:
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096
            # later
            prune: false

            """
        XCTAssertEqual(try edit("version: 1\nfiles:\n# later\nprune: false\n"), expected)
        XCTAssertEqual(try edit("version: 1\nfiles: ~\n# later\nprune: false\n"), expected)
        XCTAssertEqual(try edit("version: 1\nfiles: null\n# later\nprune: false\n"), expected)
    }

    func testMissingFilesKeyIsAddedAfterTheTopLevelContent() throws {
        XCTAssertEqual(
            try edit("# assets\nversion: 1\nroot: out   # relative\n\n# end of manifest\n"),
            """
            # assets
            version: 1
            root: out   # relative
            files:
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096

            # end of manifest

            """)
    }

    func testFlowTopLevelMappingStaysFlow() throws {
        let flowEntry = "{url: \"https://example.com/v2/new.bin\", dest: new.bin, sha256: \(hex), size: 4096}"
        XCTAssertEqual(try edit("{version: 1, files: []}\n"), "{version: 1, files: [\(flowEntry)]}\n")
        XCTAssertEqual(try edit("{version: 1}\n"), "{version: 1, files: [\(flowEntry)]}\n")
        XCTAssertEqual(try edit("{version: 1, files: ~}\n"), "{version: 1, files: [\(flowEntry)]}\n")
    }

    func testEmptyOrCommentOnlyManifestGetsAMinimalOne() throws {
        let minimal =
            "version: 1\nfiles:\n  - url: https://example.com/v2/new.bin\n    dest: new.bin\n    sha256: \(hex)\n    size: 4096\n"
        XCTAssertEqual(try edit(""), minimal)
        XCTAssertEqual(try edit("# assets for the demo\n"), "# assets for the demo\n" + minimal)
        XCTAssertEqual(try edit("# no newline"), "# no newline\n" + minimal)
        let created = try ManifestEditor.appending([entry], to: nil, fileName: Fixture.fileName)
        XCTAssertEqual(String(decoding: created.bytes, as: UTF8.self), minimal)
        XCTAssertEqual(created.firstIndex, 0)
        XCTAssertNotNil(Fixture.manifest(minimal))
    }

    // MARK: Refusals and findings

    func testDuplicateDestinationIsNamedWithItsPosition() {
        let original =
            "version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a\n  - url: https://e.com/b\n    dest: ./sub//new.bin\n"
        let pinned = PinnedEntry(url: "https://e.com/c", destination: "sub/new.bin", digest: digest, size: 1)
        do {
            _ = try ManifestEditor.appending([pinned], to: Array(original.utf8), fileName: Fixture.fileName)
            XCTFail("expected a refusal")
        } catch {
            XCTAssertEqual(error.reason, .destinationTaken(index: 1))
            XCTAssertEqual(
                error.description,
                "haul.yaml:6:11: error: files[1].dest: \"sub/new.bin\" is already the destination of files[1]")
        }
    }

    func testSameURLIsReportedButAllowed() throws {
        let original = "version: 1\nfiles:\n  - url: https://example.com/v2/new.bin\n    dest: old.bin\n"
        let result = try ManifestEditor.appending([entry], to: Array(original.utf8), fileName: Fixture.fileName)
        XCTAssertEqual(result.sameURL.map { $0.map(\.index) }, [[0]])
        XCTAssertEqual(result.sameURL.first?.first?.destination, "old.bin")
        XCTAssertEqual(result.sameURL.first?.first?.location, SourceLocation(line: 3, column: 10))
        XCTAssertEqual(result.firstIndex, 1)
    }

    func testLayoutsThatCannotTakeAnEntryAreRefusedWithAPosition() {
        XCTAssertEqual(
            editError("- a\n- b\n")?.description,
            "haul.yaml:1:1: error: expected a mapping at the top level, found a sequence")
        XCTAssertEqual(
            editError("version: 1\nfiles:\n  url: https://e.com/a\n")?.description,
            "haul.yaml:3:3: error: files: expected a sequence, found a mapping")
        XCTAssertEqual(
            editError("version: 1\nfiles: everything\n")?.description,
            "haul.yaml:2:8: error: files: expected a sequence, found \"everything\"")
        XCTAssertEqual(editError("version: 1\nfiles: [\n")?.reason, .notEditable)
        let utf16: [UInt8] = [0xff, 0xfe] + Array("version: 1\n".utf8).flatMap { [$0, 0] }
        XCTAssertThrowsError(try ManifestEditor.appending([entry], to: utf16, fileName: Fixture.fileName)) { error in
            XCTAssertEqual(
                (error as? ManifestEditError)?.description,
                "haul.yaml: error: the manifest is not UTF-8 text; haul edits only UTF-8 manifests")
        }
    }

    // MARK: Values

    /// Values that would read back differently (or not at all) unquoted are double-quoted; each edited manifest
    /// is loaded back by `edit`, which checks the values survive exactly.
    func testValuesThatNeedQuotingAreQuotedAndReadBackExactly() throws {
        let cases: [(url: String, dest: String, urlText: String, destText: String)] = [
            ("https://e.com/a#frag", "plain.bin", "\"https://e.com/a#frag\"", "plain.bin"),
            ("https://e.com/x?a=b:c", "yes", "https://e.com/x?a=b:c", "\"yes\""),
            ("https://e.com/x", "- dash", "https://e.com/x", "\"- dash\""),
            ("https://e.com/x", "2024", "https://e.com/x", "\"2024\""),
            ("https://e.com/x", "a: b", "https://e.com/x", "\"a: b\""),
            ("https://e.com/x", "tab\there", "https://e.com/x", "\"tab\\there\""),
            ("https://e.com/x", "say \"hi\"\\", "https://e.com/x", "say \"hi\"\\"),
            ("https://e.com/x", "line\u{2028}sep", "https://e.com/x", "\"line\\Lsep\""),
            ("https://e.com/x", "été/ça.csv", "https://e.com/x", "été/ça.csv"),
            ("https://e.com/x", ".env", "https://e.com/x", ".env"),
            ("https://e.com/x", "*star", "https://e.com/x", "\"*star\""),
        ]
        for (url, dest, urlText, destText) in cases {
            let pinned = PinnedEntry(url: url, destination: dest, digest: digest, size: 7)
            let edited = try edit("version: 1\nfiles: []\n", pinned)
            XCTAssertEqual(
                edited,
                "version: 1\nfiles:\n  - url: \(urlText)\n    dest: \(destText)\n    sha256: \(hex)\n    size: 7\n")
            // The same values inside a flow mapping, where `,[]{}` matter too.
            _ = try edit("{version: 1, files: []}", pinned)
        }
        let flow = PinnedEntry(url: "https://e.com/x", destination: "a,b[c]", digest: digest, size: 7)
        XCTAssertTrue(try edit("{version: 1, files: []}", flow).contains("dest: \"a,b[c]\""))
    }

    func testPrintedSnippet() {
        XCTAssertEqual(
            entry.yamlSnippet,
            """
            - url: https://example.com/v2/new.bin
              dest: new.bin
              sha256: \(hex)
              size: 4096

            """)
    }

    // MARK: Archives

    private let treeBase64 = "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="
    private func archive(_ rule: ExtractRule) -> PinnedEntry {
        PinnedEntry(
            url: "https://example.com/v2/sdk-2.0.tar.gz", destination: "sdk", digest: digest, size: 4096, extract: rule)
    }

    func testAnArchiveWithItsTreeGetsABlockMappingInABlockEntry() throws {
        let original = "version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a\n"
        XCTAssertEqual(
            try edit(original, archive(ExtractRule(tree: digest))),
            original + """
                  - url: https://example.com/v2/sdk-2.0.tar.gz
                    dest: sdk
                    sha256: \(hex)
                    size: 4096
                    extract:
                      tree: sha256-\(treeBase64)

                """)
    }

    func testAnArchiveWithItsTreeGetsAFlowMappingInAFlowEntry() throws {
        let original = "version: 1\nfiles:\n  - {url: https://e.com/a, dest: a}\n"
        XCTAssertEqual(
            try edit(original, archive(ExtractRule(tree: digest))),
            original
                + "  - {url: \"https://example.com/v2/sdk-2.0.tar.gz\", dest: sdk, sha256: \(hex), size: 4096, "
                + "extract: {tree: sha256-\(treeBase64)}}\n")
        XCTAssertEqual(
            try edit("{version: 1, files: []}", archive(ExtractRule(tree: digest))),
            "{version: 1, files: [{url: \"https://example.com/v2/sdk-2.0.tar.gz\", dest: sdk, sha256: \(hex), "
                + "size: 4096, extract: {tree: sha256-\(treeBase64)}}]}")
    }

    func testAnArchiveWithEveryDefaultIsExtractTrue() throws {
        XCTAssertEqual(
            archive(ExtractRule()).yamlSnippet,
            """
            - url: https://example.com/v2/sdk-2.0.tar.gz
              dest: sdk
              sha256: \(hex)
              size: 4096
              extract: true

            """)
        let original = "version: 1\nfiles:\n  - {url: https://e.com/a, dest: a}\n"
        XCTAssertEqual(
            try edit(original, archive(ExtractRule())),
            original
                + "  - {url: \"https://example.com/v2/sdk-2.0.tar.gz\", dest: sdk, sha256: \(hex), size: 4096, extract: true}\n"
        )
    }

    /// Every setting written, quoted where YAML would misread it, and read back as the same rule.
    func testEverySettingIsWrittenAndReadsBack() throws {
        let rule = ExtractRule(
            format: .sevenZip, strip: 2, include: ["bin/*", "**/*.so", "[ab]c"], exclude: ["docs/", "a,b"],
            tree: digest, maxUnpackedBytes: 3 << 30)
        XCTAssertEqual(
            try edit(nil, adding: [archive(rule)]),
            """
            version: 1
            files:
              - url: https://example.com/v2/sdk-2.0.tar.gz
                dest: sdk
                sha256: \(hex)
                size: 4096
                extract:
                  format: "7z"
                  strip: 2
                  include: [bin/*, "**/*.so", "[ab]c"]
                  exclude: [docs/, "a,b"]
                  tree: sha256-\(treeBase64)
                  max_unpacked: 3221225472

            """)
        let flow = try edit("version: 1\nfiles: [{url: \"https://e.com/a\", dest: a}]\n", archive(rule))
        XCTAssertTrue(
            flow.contains(
                "extract: {format: \"7z\", strip: 2, include: [bin/*, \"**/*.so\", \"[ab]c\"], "
                    + "exclude: [docs/, \"a,b\"], tree: sha256-\(treeBase64), max_unpacked: 3221225472}}"), flow)
    }

    func testAnEntryReadsBackAsTheArchiveOnlyWithTheSameRule() throws {
        let manifest = try XCTUnwrap(
            Fixture.manifest(
                "version: 1\nfiles:\n  - {url: \"https://example.com/v2/sdk-2.0.tar.gz\", dest: sdk/, sha256: \(hex), size: 4096, "
                    + "extract: {strip: 1}}\n"))
        XCTAssertTrue(archive(ExtractRule(strip: 1)).matches(manifest.files[0]))
        XCTAssertFalse(archive(ExtractRule()).matches(manifest.files[0]))
        XCTAssertFalse(
            PinnedEntry(
                url: "https://example.com/v2/sdk-2.0.tar.gz", destination: "sdk", digest: digest,
                size: 4096
            ).matches(manifest.files[0]), "a plain file is not the archive")
    }

    func testAnArchiveDraftNamesAFolderAfterTheArchive() throws {
        func destination(_ url: String, dest: String? = nil) throws -> String {
            try EntryDraft(url: url, destination: dest, environment: [:], unpacks: true).destination
        }
        XCTAssertEqual(try destination("https://e.com/v2/sdk-2.0.tar.gz"), "sdk-2.0")
        XCTAssertEqual(try destination("https://e.com/tool.TGZ?sig=1"), "tool")
        XCTAssertEqual(try destination("https://e.com/data.7z"), "data")
        XCTAssertEqual(try destination("https://e.com/download"), "download", "no suffix names a format")
        XCTAssertEqual(try destination("https://e.com/.tar.gz"), ".tar.gz", "nothing would be left")
        XCTAssertEqual(try destination("https://e.com/x.zip", dest: "opt/sdk/"), "opt/sdk", "a folder may end with /")
        XCTAssertThrowsError(try EntryDraft(url: "https://e.com/x.zip", destination: "opt/sdk/", environment: [:])) {
            error in
            XCTAssertEqual(
                (error as? EntryDraftError)?.messages,
                ["destination \"opt/sdk/\" ends with \"/\"; a destination names a file (a folder only with extract:)"])
        }
        let draft = try EntryDraft(url: "https://e.com/sdk.tar.xz", destination: nil, environment: [:], unpacks: true)
        XCTAssertEqual(
            draft.pinned(digest: digest, size: 9, extract: ExtractRule(tree: digest)).extract, ExtractRule(tree: digest)
        )
        XCTAssertEqual(ArchiveFormat.stem(of: "caf\u{e9}.TAR.ZST"), "caf\u{e9}")
        XCTAssertEqual(ArchiveFormat.named(by: "caf\u{e9}.TAR.ZST"), .tarZstd)
        XCTAssertNil(ArchiveFormat.named(by: "x\u{e}tar"), "a control byte is not a dot in another case")
    }

    // MARK: Drafts

    private func draft(
        _ url: String, dest: String? = nil, environment: [String: String] = [:]
    ) -> Result<EntryDraft, EntryDraftError> {
        Result { () throws(EntryDraftError) in try EntryDraft(url: url, destination: dest, environment: environment) }
    }

    func testDestinationDefaultsToTheURLsDecodedFileName() throws {
        XCTAssertEqual(try draft("https://e.com/a/b/data%20set.csv?sig=1#top").get().destination, "data set.csv")
        XCTAssertEqual(try draft("https://e.com/tool.tar.gz").get().destination, "tool.tar.gz")
        XCTAssertEqual(try draft("https://e.com/x", dest: "./bin//tool").get().destination, "bin/tool")
        let templated = try draft("https://${HOST}/files/a.bin", environment: ["HOST": "e.com"]).get()
        XCTAssertEqual(templated.destination, "a.bin")
        XCTAssertEqual(templated.url.expanded, "https://e.com/files/a.bin")
        XCTAssertEqual(
            templated.pinned(digest: digest, size: 1).url, "https://${HOST}/files/a.bin",
            "the manifest gets the reference, not its value")
        // The name is the one the URL will fetch, whichever part a variable supplies.
        XCTAssertEqual(
            try draft("${BASE}/files/b.bin", environment: ["BASE": "https://e.com"]).get().destination, "b.bin")
        XCTAssertEqual(
            try draft(
                "https://e.com/v/${NAME}?token=${TOKEN}",
                environment: ["NAME": "tool-1.2.tgz", "TOKEN": "s3cret"]
            ).get().destination, "tool-1.2.tgz")
    }

    func testDraftsTheLoaderWouldRejectAreRefused() {
        func messages(_ url: String, dest: String? = nil, environment: [String: String] = [:]) -> [String] {
            if case .failure(let error) = draft(url, dest: dest, environment: environment) { return error.messages }
            return []
        }
        XCTAssertEqual(
            messages("https://e.com/"),
            ["URL \"https://e.com/\" has no file name at the end of its path; choose a destination with --dest"])
        XCTAssertEqual(
            messages("https://user:secret@e.com"),
            ["URL \"https://***@e.com\" has no file name at the end of its path; choose a destination with --dest"])
        XCTAssertEqual(
            messages("https://e.com/a%2Fb"),
            [
                "the file name in URL \"https://e.com/a%2Fb\" decodes to \"a/b\", which is not a plain file name; "
                    + "choose a destination with --dest"
            ])
        XCTAssertEqual(
            messages("https://e.com/.."),
            [
                "destination \"..\" contains \"..\"; destinations must stay inside root (derived from the URL; "
                    + "choose one with --dest)"
            ])
        XCTAssertEqual(
            messages("https://e.com/x", dest: ".haul/state"),
            ["\".haul/state\" is inside \".haul\", haul's private folder under root"])
        XCTAssertEqual(
            messages("https://e.com/x", dest: "/etc/passwd"),
            ["destination \"/etc/passwd\" is absolute; destinations are relative to root"])
        XCTAssertEqual(messages("ftp://e.com/x"), ["unsupported URL scheme \"ftp\" (haul fetches http and https)"])
        XCTAssertEqual(messages("https://e.com/${TOKEN}/x"), ["environment variable TOKEN is not set"])
    }

    // MARK: Re-pinning

    func testRepinningAnUnpinnedEntryAddsItsKeysAfterItsLastLine() throws {
        let text = """
            files:
              - url: https://e.com/a.bin   # upstream
                dest: a.bin
                # no checksum yet
              - url: https://e.com/b.bin
                dest: b.bin
                checksum: md5:\(String(repeating: "0", count: 32))
            prune: false

            """
        let first = try ManifestEditor.repinning(
            0, digest: digest, size: 12, in: Array(text.utf8), fileName: Fixture.fileName)
        XCTAssertEqual(
            String(decoding: first, as: UTF8.self),
            text.replacingOccurrences(
                of: "    dest: a.bin\n", with: "    dest: a.bin\n    sha256: \(hex)\n    size: 12\n"))
        // The prefixed notation takes any algorithm: a weak pin becomes a strong one where it stands.
        let second = try ManifestEditor.repinning(1, digest: digest, size: nil, in: first, fileName: Fixture.fileName)
        XCTAssertEqual(
            String(decoding: second, as: UTF8.self),
            String(decoding: first, as: UTF8.self).replacingOccurrences(
                of: "md5:\(String(repeating: "0", count: 32))", with: "sha256:\(hex)"))
        // A key that names another algorithm cannot hold this digest.
        let sha512Entry = Array(
            "files:\n  - {url: https://e.com/c, dest: c, sha512: \(String(repeating: "1", count: 128))}\n".utf8)
        XCTAssertThrowsError(
            try ManifestEditor.repinning(0, digest: digest, size: nil, in: sha512Entry, fileName: Fixture.fileName))
    }

    /// `files[index]` of `text` re-pinned with a tree, after checking that it loads and reads back that tree.
    private func repinTree(
        _ text: String, index: Int = 0, size: Int64? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) throws -> String {
        let edited = String(
            decoding: try ManifestEditor.repinning(
                index, digest: digest, size: size, tree: digest, in: Array(text.utf8),
                fileName: Fixture.fileName), as: UTF8.self)
        let manifest = Fixture.manifest(edited, file: file, line: line)
        XCTAssertEqual(manifest?.files[index].extract?.tree, digest, edited, file: file, line: line)
        XCTAssertEqual(manifest?.files[index].checksum?.digest, digest, edited, file: file, line: line)
        return edited
    }

    func testRepinningATreeTurnsExtractTrueIntoItsSettings() throws {
        let text = """
            version: 1
            files:
              - url: https://e.com/sdk.tar.gz
                dest: sdk
                sha256: \(String(repeating: "0", count: 64))
                extract: true   # unpacked
              - {url: https://e.com/b.tar.gz, dest: b, extract: true}

            """
        let first = try repinTree(text)
        XCTAssertEqual(
            first,
            text.replacingOccurrences(of: String(repeating: "0", count: 64), with: hex)
                .replacingOccurrences(of: "extract: true   #", with: "extract: {tree: sha256-\(treeBase64)}   #"))
        XCTAssertEqual(
            try repinTree(first, index: 1),
            first.replacingOccurrences(
                of: "extract: true}", with: "extract: {tree: sha256-\(treeBase64)}, sha256: \(hex)}"))
    }

    func testRepinningATreeReplacesItOrAddsItAfterTheLastSetting() throws {
        let old = "sha256-" + String(repeating: "A", count: 43) + "="
        let text = """
            version: 1
            files:
              - url: https://e.com/sdk.tar.gz
                dest: sdk
                sha256: \(hex)
                extract:
                  strip: 1
                  tree: \(old)   # pinned by hand
              - url: https://e.com/b.tar.gz
                dest: b
                sha256: \(hex)
                extract:
                  strip: 1
                  # keeps the comment inside
              - {url: https://e.com/c.tar.gz, dest: c, sha256: \(hex), extract: {strip: 2}}
              - {url: https://e.com/d.tar.gz, dest: d, sha256: \(hex), extract: {}}
            prune: false

            """
        let tree = "sha256-\(treeBase64)"
        let first = try repinTree(text)
        XCTAssertEqual(first, text.replacingOccurrences(of: old, with: tree))
        // At the entry's end, the tree goes inside extract: (a comment at its keys' column stays with what follows),
        // before the size the entry gains.
        let second = try repinTree(first, index: 1, size: 7)
        XCTAssertEqual(
            second,
            first.replacingOccurrences(
                of: "      strip: 1\n      # keeps the comment inside\n",
                with: "      strip: 1\n      tree: \(tree)\n      # keeps the comment inside\n    size: 7\n"))
        let third = try repinTree(second, index: 2)
        XCTAssertEqual(third, second.replacingOccurrences(of: "{strip: 2}", with: "{strip: 2, tree: \(tree)}"))
        XCTAssertEqual(
            try repinTree(third, index: 3),
            third.replacingOccurrences(of: "extract: {}", with: "extract: {tree: \(tree)}"))
    }

    func testATreeIsNotPinnedInAnEntryWithoutExtract() {
        let text = Array("files:\n  - {url: https://e.com/c, dest: c, sha256: \(hex)}\n".utf8)
        XCTAssertThrowsError(
            try ManifestEditor.repinning(
                0, digest: digest, size: nil, tree: digest, in: text,
                fileName: Fixture.fileName)
        ) { error in
            XCTAssertEqual(
                (error as? ManifestEditError)?.diagnostic.message, "the entry has no extract: to pin a tree in")
        }
    }

    // MARK: Several entries, one edit

    private var second: PinnedEntry {
        PinnedEntry(url: "https://example.com/v2/b.bin", destination: "b.bin", digest: digest, size: nil)
    }

    func testSeveralEntriesAreAppendedInOneEditInTheManifestsOwnStyle() throws {
        let block = "version: 1\nfiles:\n  - url: https://e.com/a\n    dest: a\n# end\n"
        XCTAssertEqual(
            try edit(block, adding: [entry, second]),
            """
            version: 1
            files:
              - url: https://e.com/a
                dest: a
              - url: https://example.com/v2/new.bin
                dest: new.bin
                sha256: \(hex)
                size: 4096
              - url: https://example.com/v2/b.bin
                dest: b.bin
                sha256: \(hex)
            # end

            """)
        let oneLine = "version: 1\nfiles:\n  - {url: https://e.com/a, dest: a}\n"
        XCTAssertEqual(
            try edit(oneLine, adding: [entry, second]),
            """
            version: 1
            files:
              - {url: https://e.com/a, dest: a}
              - {url: "https://example.com/v2/new.bin", dest: new.bin, sha256: \(hex), size: 4096}
              - {url: "https://example.com/v2/b.bin", dest: b.bin, sha256: \(hex)}

            """)
        let flowLines = "version: 1\nfiles: [\n  {url: https://e.com/a, dest: a}\n]\n"
        XCTAssertEqual(
            try edit(flowLines, adding: [entry, second]),
            """
            version: 1
            files: [
              {url: https://e.com/a, dest: a},
              {url: "https://example.com/v2/new.bin", dest: new.bin, sha256: \(hex), size: 4096},
              {url: "https://example.com/v2/b.bin", dest: b.bin, sha256: \(hex)}
            ]

            """)
        XCTAssertEqual(
            try edit("{version: 1}\n", adding: [entry, second]),
            "{version: 1, files: [{url: \"https://example.com/v2/new.bin\", "
                + "dest: new.bin, sha256: \(hex), size: 4096}, {url: \"https://example.com/v2/b.bin\", dest: b.bin, sha256: \(hex)}]}\n"
        )
        let created = try edit(nil, adding: [entry, second])
        XCTAssertTrue(created.hasPrefix("version: 1\nfiles:\n  - url: https://example.com/v2/new.bin\n"), created)
        XCTAssertTrue(
            try edit("version: 1\nfiles: []\n", adding: [entry, second]).hasSuffix(
                "    dest: b.bin\n    sha256: \(hex)\n"))
    }

    func testTwoNewEntriesForOneDestinationAreRefusedNamingBoth() {
        let again = PinnedEntry(url: "https://e.com/other", destination: "new.bin", digest: digest, size: 1)
        XCTAssertThrowsError(try ManifestEditor.appending([entry, second, again], to: nil, fileName: Fixture.fileName))
        { error in
            XCTAssertEqual((error as? ManifestEditError)?.reason, .destinationRepeated(first: 0, second: 2))
            XCTAssertEqual(
                "\(error)",
                "haul.yaml: error: \"new.bin\" is the destination of two of the new entries (number 1 and number 3)")
        }
    }

    // MARK: Names a manifest must not hold raw

    func testBidiControlsAndLineSeparatorsAreWrittenAsEscapes() throws {
        let bidi = PinnedEntry(url: "https://e.com/x", destination: "bidi-\u{202E}txt.exe", digest: digest, size: 1)
        let separated = PinnedEntry(
            url: "https://e.com/y", destination: "a\u{2028}b\u{200F}c\u{061C}", digest: digest, size: 1)
        let edited = try edit("version: 1\nfiles: []\n", adding: [bidi, separated])
        XCTAssertTrue(edited.contains("    dest: \"bidi-\\u202Etxt.exe\"\n"), edited)
        XCTAssertTrue(edited.contains("    dest: \"a\\Lb\\u200Fc\\u061C\"\n"), edited)
        XCTAssertFalse(edited.unicodeScalars.contains { $0.properties.isBidiControl || $0 == "\u{2028}" }, edited)
        XCTAssertTrue(bidi.yamlSnippet.contains("dest: \"bidi-\\u202Etxt.exe\""), bidi.yamlSnippet)
    }

    // MARK: Re-pinning a block scalar

    func testRepinningABlockScalarReplacesItsContentLineOnly() throws {
        let zeros = String(repeating: "0", count: 64)
        let text = """
            files:
              - url: https://e.com/a.bin
                dest: a.bin
                sha256: >-   # folded
                  \(zeros)
              - url: https://e.com/b.bin
                dest: b.bin
                size: |-
                  12
                sha256: \(zeros)

            """
        let first = try ManifestEditor.repinning(
            0, digest: digest, size: 12, in: Array(text.utf8), fileName: Fixture.fileName)
        XCTAssertEqual(
            String(decoding: first, as: UTF8.self),
            text.replacingOccurrences(
                of: "      \(zeros)\n  - url", with: "      \(hex)\n    size: 12\n  - url"))
        let second = try ManifestEditor.repinning(1, digest: digest, size: 34, in: first, fileName: Fixture.fileName)
        XCTAssertEqual(
            String(decoding: second, as: UTF8.self),
            String(decoding: first, as: UTF8.self)
                .replacingOccurrences(of: "      12\n", with: "      34\n")
                .replacingOccurrences(of: "    sha256: \(zeros)\n", with: "    sha256: \(hex)\n"))
    }

    // MARK: Sizes a digest rules out

    func testASizeThatContradictsItsDigestIsNamed() {
        let empty = StreamingHasher.digest([], algorithm: .sha512)
        XCTAssertNil(PinnedSize.contradiction(4096, digest: digest))
        XCTAssertNil(PinnedSize.contradiction(0, digest: empty))
        XCTAssertEqual(
            PinnedSize.contradiction(0, digest: digest),
            "0 bytes, but sha256 \(hex.prefix(12))… is not the digest of empty content")
        XCTAssertEqual(
            PinnedSize.contradiction(5, digest: empty),
            "5 bytes, but sha512 \(empty.hex.prefix(12))… is the digest of empty content")
    }
}

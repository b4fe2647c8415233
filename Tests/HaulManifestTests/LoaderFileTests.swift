import Foundation
import HaulManifest
import XCTest

/// `ManifestLoader.load(path:)`: reading from disk, paths as given, root relative to the manifest's folder.
final class LoaderFileTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("haul-manifest-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory + "/project/sub", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ text: String, to relative: String) throws -> String {
        let path = directory + "/" + relative
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func testAbsolutePath() throws {
        let path = try write(
            "version: 1\nroot: ../out\nfiles:\n  - {url: \"https://e.com/a\", dest: a}\n", to: "project/sub/haul.yaml")
        let manifest = try ManifestLoader.load(path: path, environment: [:])
        XCTAssertEqual(manifest.sourcePath, path)
        XCTAssertEqual(manifest.root, directory + "/project/out")
        XCTAssertEqual(manifest.files.count, 1)
    }

    func testRootDefaultsToTheManifestsFolder() throws {
        let path = try write("version: 1\nfiles: []\n", to: "project/haul.yaml")
        XCTAssertEqual(try ManifestLoader.load(path: path, environment: [:]).root, directory + "/project")
    }

    /// Root is relative to the manifest's folder, normalized, wherever `root:` stands among the keys.
    func testRootResolvesAgainstTheManifestsFolderWhereverItIsWritten() throws {
        let entries = (0..<3).map { "  - {url: \"https://e.com/\($0)\", dest: f\($0)}\n" }.joined()
        let cases: [(text: String, root: String?)] = [
            ("version: 1\nroot: ../out\nfiles:\n\(entries)", directory + "/out"),
            ("root: /abs//out/\nversion: 1\nfiles:\n\(entries)", "/abs/out"),
            ("version: 1\nfiles:\n\(entries)", directory + "/project"),
            ("version: 1\nfiles:\n\(entries)root: late\n", directory + "/project/late"),
            ("version: 1\nroot: \"\"\nfiles: []\n", nil),
            ("version: 1\nroot: ${HOME}\nfiles: []\n", nil),
        ]
        for (text, expected) in cases {
            let path = try write(text, to: "project/haul.yaml")
            XCTAssertEqual(try? ManifestLoader.load(path: path, environment: [:]).root, expected, text)
        }
    }

    func testRelativePathResolvesAgainstTheWorkingDirectory() throws {
        _ = try write(
            "version: 1\nroot: assets\nfiles:\n  - {url: \"https://e.com/a\", dest: a, sha256: x}\n",
            to: "project/haul.yaml")
        let cwd = FileManager.default.currentDirectoryPath
        let upToRoot = Array(repeating: "..", count: cwd.split(separator: "/").count).joined(separator: "/")
        let relative = (upToRoot.isEmpty ? "." : upToRoot) + directory + "/./project//haul.yaml"
        do {
            _ = try ManifestLoader.load(path: relative, environment: [:])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(
                error.diagnostics.map(\.description),
                [
                    "\(relative):4:47: error: files[0].sha256: invalid character \"x\" at position 1 (expected 64 hex digits)"
                ],
                "messages name the file as the user did")
        }
        try Data("version: 1\nroot: assets\nfiles: []\n".utf8).write(
            to: URL(fileURLWithPath: directory + "/project/haul.yaml"))
        let manifest = try ManifestLoader.load(path: relative, environment: [:])
        XCTAssertEqual(manifest.root, directory + "/project/assets")
        XCTAssertEqual(manifest.sourcePath, relative)
    }

    func testMissingFile() {
        let path = "no-such-folder-\(UUID().uuidString)/haul.yaml"
        do {
            _ = try ManifestLoader.load(path: path, environment: [:])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(
                error.diagnostics.map(\.description),
                ["\(path): error: cannot read manifest: No such file or directory"])
            XCTAssertNil(error.diagnostics.first?.location)
            XCTAssertEqual(error.description, "\(path): error: cannot read manifest: No such file or directory")
        }
    }

    func testDirectoryInsteadOfFile() {
        do {
            _ = try ManifestLoader.load(path: directory, environment: [:])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(
                error.diagnostics.map(\.description), ["\(directory): error: cannot read manifest: Is a directory"])
        }
    }

    /// A pipe (`haul sync <(…)`) has no folder of its own; its lexical one (`/dev/fd`, or wherever the FIFO is) is
    /// no place for files: root is relative to the current directory.
    func testAManifestReadFromAPipeHasRootInTheCurrentDirectory() throws {
        let fifo = directory + "/project/pipe.yaml"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let writer = Thread {
            guard let handle = FileHandle(forWritingAtPath: fifo) else { return }
            handle.write(Data("version: 1\nroot: out\nfiles: [{url: \"https://e.com/a\", dest: a}]\n".utf8))
            try? handle.close()
        }
        writer.start()
        let manifest = try ManifestLoader.load(path: fifo, environment: [:])
        XCTAssertEqual(manifest.root, FileManager.default.currentDirectoryPath + "/out")
        XCTAssertEqual(manifest.sourcePath, fifo)
        XCTAssertEqual(manifest.files.map(\.destination.description), ["a"])
    }

    /// `/dev/stdin` redirected from a file, or `/dev/fd/N` of one, is a regular file whose lexical folder is not
    /// its own.
    func testAManifestNamedThroughADescriptorHasRootInTheCurrentDirectory() throws {
        let path = try write("version: 1\nroot: out\nfiles: []\n", to: "project/haul.yaml")
        let descriptor = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        for alias in ["/dev/fd/\(descriptor)", "/proc/self/fd/\(descriptor)", "/dev/fd/../fd/\(descriptor)"] {
            XCTAssertEqual(
                try ManifestLoader.load(path: alias, environment: [:]).root,
                FileManager.default.currentDirectoryPath + "/out", alias)
        }
        XCTAssertEqual(try ManifestLoader.load(path: path, environment: [:]).root, directory + "/project/out")
    }

    func testLargeFileIsReadCompletely() throws {
        var text = "version: 1\nfiles:\n"
        for index in 0..<2000 {
            text += "  - {url: \"https://e.com/\(index)\", dest: \"d/\(index)\", sha256: \(Fixture.sha256)}\n"
        }
        let path = try write(text, to: "project/big.yaml")
        XCTAssertGreaterThan(text.utf8.count, 1 << 16, "spans several read chunks")
        XCTAssertEqual(try ManifestLoader.load(path: path, environment: [:]).files.count, 2000)
    }
}

/// The callback is called on the loading thread; a class only so that the closure can record into it.

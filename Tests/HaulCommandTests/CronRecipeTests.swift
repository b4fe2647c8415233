import Foundation
import HaulTestSupport
import XCTest

/// README's cron recipe, run as cron runs it: `/bin/sh -c` with nothing in the environment but cron's
/// `PATH=/usr/bin:/bin` and what the crontab sets, against haul where `scripts/install.sh` puts it by default.
final class CronRecipeTests: XCTestCase {
    private static let top = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    private static let cronPath = "/usr/bin:/bin"

    func testTheCronRecipeRunsWithCronsPathAndTheDefaultPrefix() throws {
        let crontab = try Self.readmeCrontab()
        let prefix = try Self.defaultInstallPrefix()
        let directory = try TemporaryDirectory()
        let body = Array("{\"feed\": 1}\n".utf8)
        let server = try LoopbackHTTPServer(files: ["/feed.json": body])
        defer { server.stop() }

        // The default prefix stands for a folder of this test's, holding the haul under test as install.sh would.
        try directory.makeDirectory("prefix/bin")
        XCTAssertEqual(symlink(HaulProcess.executablePath, directory.path("prefix/bin/haul")), 0)
        func relocated(_ text: String) -> String {
            text.replacingOccurrences(of: prefix + "/", with: directory.path("prefix") + "/")
        }

        let job = try XCTUnwrap(crontab.jobs.first, "README's cron block has no job line")
        XCTAssertEqual(crontab.jobs.count, 1, "README's cron block: \(crontab.jobs)")
        let folder = try XCTUnwrap(
            job.firstMatch(of: #/^cd (\S+) && /#)?.output.1, "the job does not start with cd FOLDER: \(job)")
        let manifest = try XCTUnwrap(
            job.firstMatch(of: #/ sync (\S+\.yaml) /#)?.output.1, "the job syncs no manifest: \(job)")
        try directory.makeDirectory("data")
        try directory.write(
            "data/" + manifest, "version: 1\nfiles:\n  - url: \(server.url("/feed.json"))\n    dest: feed.json\n")
        let command = relocated(job).replacingOccurrences(of: "cd \(folder) ", with: "cd \(directory.path("data")) ")

        let environment =
            ["PATH=" + Self.cronPath, "HOME=" + directory.path("data"), "SHELL=/bin/sh"]
            + crontab.settings.map(relocated)
        let result = try ProcessRunner.run(
            "/usr/bin/env", ["-i"] + environment + ["/bin/sh", "-c", command], timeout: 60)
        XCTAssertEqual(result.exitCode, 0, "\(command): \(result.stderr)")
        XCTAssertEqual(result.stdout + result.stderr, "", "--quiet: cron mails only errors")
        XCTAssertEqual(directory.read("data/feed.json"), body)
    }

    /// The crontab in README's ```cron block: its variable settings and its job lines (less the five time fields).
    private static func readmeCrontab() throws -> (settings: [String], jobs: [String]) {
        let readme = try String(contentsOfFile: top + "/README.md", encoding: .utf8)
        let block = try XCTUnwrap(
            readme.firstMatch(of: /```cron\n((?:.*\n)*?)```/)?.output.1, "README has no ```cron block")
        var settings: [String] = [], jobs: [String] = []
        for line in block.split(separator: "\n") where !line.hasPrefix("#") && !line.allSatisfy(\.isWhitespace) {
            guard let first = line.first, first.isNumber || first == "*" else {
                settings.append(String(line))
                continue
            }
            let job = try XCTUnwrap(
                line.firstMatch(of: /^(?:\S+\s+){5}(\S.*)$/)?.output.1, "not a crontab line: \(line)")
            jobs.append(String(job))
        }
        return (settings, jobs)
    }

    /// The prefix `scripts/install.sh` installs to when given none.
    private static func defaultInstallPrefix() throws -> String {
        let script = try String(contentsOfFile: top + "/scripts/install.sh", encoding: .utf8)
        return try XCTUnwrap(
            script.firstMatch(of: /\nPREFIX=\$\{1:-([^}]+)\}/)?.output.1.description,
            "scripts/install.sh sets no default PREFIX")
    }
}

import Foundation
import HaulSignature
import HaulTestSupport
import XCTest

/// OpenPGP signatures made here by gpg, checked by the system's `sqv` and `gpgv` through `OpenPGPVerifier`.
final class OpenPGPVerifierTests: XCTestCase {
    private var tools: SigningTools!
    private var gnupg: [String: String] = [:]
    private let message = "sha256  9f86d081884c7d659a2feaa0c55ad015  haul.tar.gz\n"

    override func setUpWithError() throws {
        _ = try Capability.tool("gpg")
        tools = try SigningTools()
        try FileManager.default.createDirectory(atPath: tools.path("gnupg"), withIntermediateDirectories: false)
        chmod(tools.path("gnupg"), 0o700)
        gnupg = ["GNUPGHOME": tools.path("gnupg")]
        try tools.write("list", message)
        for name in ["a", "b"] {
            try gpg(["--quick-gen-key", "\(name) <\(name)@haul.invalid>", "ed25519", "sign", "never"])
        }
        try gpg(["--output", "a.gpg", "--export", "a@haul.invalid"])
        try gpg(["--local-user", "a@haul.invalid", "--detach-sign", "--output", "list.sig", "list"])
        try gpg(["--local-user", "b@haul.invalid", "--detach-sign", "--output", "list.by-b", "list"])
        try gpg(["--local-user", "a@haul.invalid", "--clearsign", "--output", "list.asc", "list"])
    }

    override func tearDownWithError() throws {
        if !gnupg.isEmpty { _ = try? ProcessRunner.run("gpgconf", ["--kill", "gpg-agent"], environment: gnupg) }
        tools = nil
    }

    private func gpg(_ arguments: [String]) throws {
        try tools.run("gpg", ["--batch", "--quiet", "--yes", "--passphrase", ""] + arguments, environment: gnupg)
    }

    /// A search path holding only `tools` (links to the installed ones): which verifier the type finds.
    private func searchPath(_ verifiers: [String]) throws -> String {
        let folder = tools.path("bin-" + verifiers.joined(separator: "-"))
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        for verifier in verifiers {
            try FileManager.default.createSymbolicLink(
                atPath: "\(folder)/\(verifier)", withDestinationPath: Capability.tool(verifier))
        }
        return folder
    }

    private func detached(
        _ signature: String, _ data: String = "list", path: String
    )
        -> Result<OpenPGPVerified, OpenPGPFailure>
    {
        OpenPGPVerifier.verifyDetached(
            signatureFile: tools.path(signature), dataFile: tools.path(data), keyringFile: tools.path("a.gpg"),
            searchPath: path)
    }

    func testDetachedSignatureVerifiesBySqvFirstAndByGpgv() throws {
        let both = try searchPath(["gpgv", "sqv"])
        XCTAssertEqual(try detached("list.sig", path: both).get().verifier.tool, .sqv)
        let gpgvOnly = try searchPath(["gpgv"])
        XCTAssertEqual(try detached("list.sig", path: gpgvOnly).get().verifier.tool, .gpgv)
    }

    func testChangedMessageSignatureByAnotherKeyAndTruncatedSignatureAreRefusedByEachVerifier() throws {
        try tools.write("changed", message.replacingOccurrences(of: "9f86", with: "0f86"))
        let signature = try tools.read("list.sig")
        try tools.write("list.truncated", Array(signature.prefix(signature.count / 2)))
        try tools.write(
            "list.garbled", signature.enumerated().map { $0.offset == signature.count - 10 ? ~$0.element : $0.element })
        for verifier in ["sqv", "gpgv"] {
            let path = try searchPath([verifier])
            for (signature, data) in [
                ("list.sig", "changed"), ("list.by-b", "list"), ("list.truncated", "list"), ("list.garbled", "list"),
            ] {
                guard case .failure(.rejected) = detached(signature, data, path: path) else {
                    return XCTFail("\(verifier) accepted \(signature) of \(data)")
                }
            }
        }
    }

    func testNoVerifierOnThePathIsItsOwnFailure() throws {
        XCTAssertEqual(detached("list.sig", path: try searchPath([])).failure, .verifierMissing)
        // Nor is one in a relative folder of the search path (the download folder, say): here one that leads from the
        // current folder up to the root and down to a folder with gpgv.
        let absolute = try searchPath(["gpgv"])
        let depth = FileManager.default.currentDirectoryPath.split(separator: "/").count
        let relative = String(repeating: "../", count: depth) + absolute.dropFirst()
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: relative + "/gpgv"))
        XCTAssertNil(OpenPGPVerifier.find(searchPath: relative))
        let sqvOnly = try searchPath(["sqv"])
        XCTAssertEqual(
            OpenPGPVerifier.verifyClearSigned(
                messageFile: tools.path("list.asc"), keyringFile: tools.path("a.gpg"), searchPath: sqvOnly
            ).failure, .verifierMissing)
    }

    /// What is trusted is the text gpgv says was signed: lines added around the signed block are not in it, and a
    /// line changed inside it fails.
    func testClearSignedMessageReturnsOnlyTheSignedText() throws {
        let path = try searchPath(["gpgv"])
        let armored = try tools.text("list.asc")
        try tools.write(
            "list.wrapped.asc",
            "sha256  0000000000000000000000000000000  evil.tar.gz\n" + armored + "sha256  1111  evil2\n")
        try tools.write("list.altered.asc", replacing("9f86", with: "0f86", in: armored))
        func verify(_ name: String) -> Result<OpenPGPVerified, OpenPGPFailure> {
            OpenPGPVerifier.verifyClearSigned(
                messageFile: tools.path(name), keyringFile: tools.path("a.gpg"), searchPath: path)
        }
        XCTAssertEqual(try verify("list.asc").get().signedText, Array(message.utf8))
        XCTAssertEqual(try verify("list.wrapped.asc").get().signedText, Array(message.utf8))
        guard case .failure(.rejected) = verify("list.altered.asc") else { return XCTFail("an altered text verified") }
    }
}

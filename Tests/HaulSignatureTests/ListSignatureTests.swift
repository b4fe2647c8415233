import Foundation
import HaulSignature
import HaulTestSupport
import XCTest

/// One list, signed by real tools, checked against sets of trusted keys: the format is read from the signature, a
/// key of another kind is never tried, the key that made it wins among several, a retired key is refused.
final class ListSignatureTests: XCTestCase {
    private var tools: SigningTools!
    private let list = Array("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  tool.tar.gz\n".utf8)
    private let now = 1_800_000_000.0

    override func setUpWithError() throws {
        _ = try Capability.tool("minisign")
        _ = try Capability.tool("ssh-keygen")
        tools = try SigningTools()
        try tools.write("SHA256SUMS", list)
        for name in ["old", "new"] {
            try tools.run("minisign", ["-G", "-W", "-p", "\(name).pub", "-s", "\(name).key"])
        }
        try tools.run("minisign", ["-S", "-s", "new.key", "-m", "SHA256SUMS", "-t", "nightly 2026-11-29"])
        try tools.run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "release@haul.invalid", "-f", "ssh"])
        try tools.run("ssh-keygen", ["-Y", "sign", "-f", "ssh", "-n", "file", "SHA256SUMS"])
    }

    override func tearDown() { tools = nil }

    private func key(_ file: String, retiredAfter: Double? = nil) throws -> TrustedKey {
        let material = try TrustedKey.file(tools.read(file), path: tools.path(file)).get()
        return TrustedKey(material: material, retiredAfter: retiredAfter, name: file)
    }

    private func verify(_ signature: String, _ keys: [TrustedKey]) throws -> Result<VerifiedList, ListRefusal> {
        ListSignature.verify(
            list: list, signature: try tools.read(signature), keys: keys, now: now,
            checkOpenPGP: { _, _, _ in
                XCTFail("no OpenPGP here"); return .failure(.verifierMissing)
            })
    }

    func testTheKeyThatMadeItVerifiesItAmongSeveral() throws {
        let verified = try verify("SHA256SUMS.minisig", [key("old.pub"), key("new.pub")]).get()
        XCTAssertEqual(verified.key, "new.pub")
        XCTAssertEqual(verified.format, .minisign)
        XCTAssertEqual(verified.trustedComment, "nightly 2026-11-29")
        XCTAssertEqual(verified.text, list)
    }

    func testAnInlineKeyIsTheSameAsItsFile() throws {
        let line = try lines(tools.text("new.pub"))[1]
        let inline = try XCTUnwrap(TrustedKey.inline(line)).get()
        XCTAssertEqual(inline, try key("new.pub").material)
        let sshLine = try tools.text("ssh.pub")
        XCTAssertEqual(try XCTUnwrap(TrustedKey.inline(sshLine)).get(), try key("ssh.pub").material)
        XCTAssertNil(TrustedKey.inline("keys/release.pub"), "a path is not an inline key")
    }

    /// Only the old key trusted: the signature names another key, and says so.
    func testASignatureByAnUntrustedKeyIsRefusedAsSuch() throws {
        guard case .failure(.rejected(.signedByAnotherKey)) = try verify("SHA256SUMS.minisig", [key("old.pub")]) else {
            return XCTFail("a signature by a key not trusted must be refused")
        }
    }

    /// Of two keys, the one the signature names decides what is said: the list changed, not "another key".
    func testTheClosestRefusalIsSaid() throws {
        try tools.write("SHA256SUMS", list + Array("ffff  extra\n".utf8))
        let result = ListSignature.verify(
            list: try tools.read("SHA256SUMS"), signature: try tools.read("SHA256SUMS.minisig"),
            keys: [try key("new.pub"), try key("old.pub")], now: now,
            checkOpenPGP: { _, _, _ in .failure(.verifierMissing) })
        XCTAssertEqual(result.failure, .rejected(.messageMismatch))
    }

    func testAKeyIsRetiredAfterItsDay() throws {
        XCTAssertNoThrow(try verify("SHA256SUMS.minisig", [key("new.pub", retiredAfter: now + 1)]).get())
        XCTAssertEqual(
            try verify("SHA256SUMS.minisig", [key("new.pub", retiredAfter: now - 1)]).failure,
            .retired(key: "new.pub", after: now - 1))
    }

    /// The SSH signature is read as one, and a minisign key is not tried on it.
    func testTheFormatComesFromTheSignatureAndPicksTheKeys() throws {
        XCTAssertEqual(try verify("SHA256SUMS.sig", [key("ssh.pub")]).get().format, .ssh)
        XCTAssertEqual(try verify("SHA256SUMS.sig", [key("new.pub")]).failure, .noKeyOfFormat(.ssh))
        try tools.write("garbage.sig", "not a signature\n")
        XCTAssertEqual(try verify("garbage.sig", [key("new.pub")]).failure, .unknownFormat)
    }

    /// A key file that is neither minisign's nor SSH's is an OpenPGP keyring, handed to the verifier by its path.
    func testAnyOtherKeyFileIsAnOpenPGPKeyringCheckedByTheCaller() throws {
        try tools.write("release.gpg", [0x99, 0x01, 0x0d])
        let keyring = try key("release.gpg")
        XCTAssertEqual(keyring.material, .openPGPKeyring(path: tools.path("release.gpg")))
        let signed = ListSignature.verify(
            list: list, signature: [0x89, 0x01], keys: [keyring], now: now,
            checkOpenPGP: { text, signature, path in
                XCTAssertEqual(path, self.tools.path("release.gpg"))
                XCTAssertEqual(signature, [0x89, 0x01])
                return .success(text)
            })
        XCTAssertEqual(try signed.get().format, .openPGP)
        let refused = ListSignature.verify(
            list: list, signature: [0x89, 0x01], keys: [keyring], now: now,
            checkOpenPGP: { _, _, path in .failure(.rejected(path: path, exitStatus: 1)) })
        XCTAssertEqual(refused.failure, .openPGP(.rejected(path: tools.path("release.gpg"), exitStatus: 1)))
    }
}

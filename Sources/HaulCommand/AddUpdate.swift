import ArgumentParser
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulManifest

/// `haul add --update DEST`: the entry for DEST pinned anew, after its file changed upstream. Its own url is fetched
/// (with its headers, as sync sends them) and hashed with the entry's own algorithm, or the digest given is taken;
/// then only the checksum and size values change, where they stand, in the entry's own notation: every comment and
/// line around them stays. The new file is put in place as `haul add` puts a new entry's.
extension AddCommand {
    func update(_ destinationText: String, rewrites: URLRewriter) throws {
        guard let original = try readManifest() else {
            Output.errors(["error: \(manifest) does not exist: there is no entry to update"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let loaded: Manifest
        do {
            loaded = try parseManifest(original)
        } catch {
            Output.errors(error.lines.map { TerminalText($0) })
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        let destination = DestinationPath.commandLine(destinationText) ?? destinationText
        guard let index = loaded.files.firstIndex(where: { $0.destination.description == destination }) else {
            Output.errors([TerminalText("error: \(manifest) has no entry with dest \(String(reflecting: destination))")])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        let entry = loaded.files[index]
        let netrc = try netrcOptions.credentials(manifestWants: loaded.netrc)
        // The entry's own algorithm, so that its notation can stay; a weak one is replaced by SHA-256.
        let algorithm = entry.checksum.map { $0.digest.algorithm.isWeak ? DigestAlgorithm.sha256 : $0.digest.algorithm } ?? .sha256
        let given = try givenDigest()
        let kept = given == nil ? try keptDownloads() : nil
        defer { kept?.remove() }
        let (pin, interrupts) = try transferring(rewrites: rewrites, netrc: netrc, manifestHeaders: entry.headers) {
            options, cancellation throws(PinFailure) -> (Digest, Int64?) in
            if let given {
                if let size = self.size { return (given, size) }
                return (given, try announcedSize(entry.url, digest: given, options: options, cancellation: cancellation))
            }
            let measured = try Pinner.measure(entry.url, options: options, algorithm: algorithm, keepingIn: kept,
                                              cancellation: cancellation, attemptFailed: Self.retrying)
            return (measured.digest, measured.size)
        }
        let (digest, size) = pin

        let subject = "files[\(index)] (\(entry.destination))"
        guard entry.checksum?.digest != digest || (size != nil && entry.size != size) else {
            Output.lines([TerminalText("\(subject) is already pinned to what \(entry.url) serves; \(manifest) was not modified.")])
            if let kept { try place([entry.destination.description], of: loaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts) }
            return
        }
        let edited: [UInt8]
        let reloaded: Manifest
        do {
            edited = try ManifestEditor.repinning(index, digest: digest, size: size, in: original, fileName: manifest)
            reloaded = try parseManifest(edited)
            guard reloaded.files.indices.contains(index), reloaded.files[index].checksum?.digest == digest,
                  size == nil || reloaded.files[index].size == size else {
                Output.errors(["error: internal error: the edited manifest does not read back the new pin; \(manifest) was not modified"])
                throw ExitCode(ExitStatus.entryFailed.rawValue)
            }
        } catch let error as ManifestEditError {
            Output.errors([TerminalText(error.description), "\(manifest) was not modified"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        } catch let error as ManifestError {
            // The manifest loaded before the edit: the new pin is what does not load, at the entry's own line.
            let position = "\(manifest):\(entry.location.line):\(entry.location.column)"
            Output.errors([TerminalText("error: \(position): \(subject): the new pin does not load back: "
                                        + Self.withoutPositions(error).joined(separator: "; ")),
                           "\(manifest) was not modified"])
            throw ExitCode(ExitStatus.invalidManifest.rawValue)
        }
        try replaceManifest(original, with: edited, interrupts: interrupts)
        let old = entry.checksum.map { "\($0.digest.algorithm.rawValue) \($0.digest.hex.prefix(12))…" } ?? "unpinned"
        let sizeText = size.map { ", \(ByteCount.format($0))" } ?? ""
        Output.lines([TerminalText("Updated \(subject) in \(manifest), line \(entry.location.line): \(old) → "
                                   + "\(digest.algorithm.rawValue) \(digest.hex.prefix(12))…\(sizeText).")])
        guard let kept else {
            return Output.lines([TerminalText("Run \"\(syncCommand)\" to put it in place.")])
        }
        try place([entry.destination.description], of: reloaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts)
    }
}

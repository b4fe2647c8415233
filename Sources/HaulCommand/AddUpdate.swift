import ArgumentParser
import Glibc
import Haul
import HaulDigest
import HaulEngine
import HaulManifest

/// `haul add --update DEST`: the entry for DEST pinned anew, after its file changed upstream. Its own url is fetched
/// (with its headers, as sync sends them) and hashed with the entry's own algorithm, or the digest given is taken;
/// then only the checksum and size values change, where they stand, in the entry's own notation: every comment and
/// line around them stays. An archive entry (`extract:`) is unpacked by its own settings and its tree pinned anew as
/// well. The new file is put in place as `haul add` puts a new entry's.
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
        let subject = "files[\(index)] (\(entry.destination))"
        if given != nil, entry.extract?.tree != nil {
            Output.errors([TerminalText("error: \(subject) pins the tree its archive unpacks to; --update downloads the archive "
                                        + "to pin both (give no --\(givenDigests[0].0))")])
            throw ExitCode(ExitStatus.usage.rawValue)
        }
        let kept = given == nil ? try keptDownloads() : nil
        defer { kept?.remove() }
        let (pin, interrupts) = try transferring(rewrites: rewrites, netrc: netrc, manifestHeaders: entry.headers) {
            options, cancellation throws(PinFailure) -> (Digest, Int64?, Digest?) in
            if let given {
                if let size = self.size { return (given, size, nil) }
                return (given, try announcedSize(entry.url, digest: given, options: options, cancellation: cancellation), nil)
            }
            guard let rule = entry.extract else {
                let measured = try Pinner.measure(entry.url, options: options, algorithm: algorithm, keepingIn: kept,
                                                  cancellation: cancellation, attemptFailed: Self.retrying)
                Self.warnIfEncoded(measured)
                return (measured.digest, measured.size, nil)
            }
            let measured = try Pinner.measureArchive(entry.url, rule: rule, options: options, algorithm: algorithm, keepingIn: kept,
                                                     cancellation: cancellation, attemptFailed: Self.retrying)
            Self.warnIfEncoded(measured.archive)
            return (measured.archive.digest, measured.archive.size, measured.tree)
        }
        let (digest, size, tree) = pin

        guard entry.checksum?.digest != digest || (size != nil && entry.size != size) || (tree != nil && entry.extract?.tree != tree) else {
            Output.lines([TerminalText("\(subject) is already pinned to what \(entry.url) serves; \(manifest) was not modified.")])
            if let kept { try place([entry.destination.description], of: loaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts) }
            return
        }
        let edited: [UInt8]
        let reloaded: Manifest
        do {
            edited = try ManifestEditor.repinning(index, digest: digest, size: size, tree: tree, in: original, fileName: manifest)
            reloaded = try parseManifest(edited)
            guard reloaded.files.indices.contains(index), reloaded.files[index].checksum?.digest == digest,
                  size == nil || reloaded.files[index].size == size, tree == nil || reloaded.files[index].extract?.tree == tree else {
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
        let old = entry.checksum.map { Self.shortPin($0.digest, tree: tree == nil ? nil : entry.extract?.tree) } ?? "unpinned"
        let sizeText = size.map { ", \(ByteCount.format($0))" } ?? ""
        Output.lines([TerminalText("Updated \(subject) in \(manifest), line \(entry.location.line): \(old) → "
                                   + "\(Self.shortPin(digest, tree: tree))\(sizeText).")])
        guard let kept else {
            return Output.lines([TerminalText("Run \"\(syncCommand)\" to put it in place.")])
        }
        try place([entry.destination.description], of: reloaded, from: kept, netrc: netrc, rewrites: rewrites, interrupts: interrupts)
    }
}

/// Commands that messages name, written so that they can be copied into a shell as they are.
package enum CommandHint {
    /// `haul add --update DEST`, with `--manifest FILE` when the manifest is not the default one: the command that
    /// pins an entry (anew, or for the first time) from what its server serves now.
    package static func update(_ destination: String, manifest: String = "haul.yaml") -> String {
        "haul add --update \(shellWord(destination))"
            + (manifest == "haul.yaml" ? "" : " --manifest \(shellWord(manifest))")
    }

    /// The text as it is when a shell reads it so, else in single quotes.
    package static func shellWord(_ text: String) -> String {
        let safe =
            !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-+=:@%,".contains($0)) }
        return safe ? text : "'" + text.map { $0 == "'" ? "'\\''" : String($0) }.joined() + "'"
    }
}

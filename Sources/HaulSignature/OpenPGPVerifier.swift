import Glibc

/// OpenPGP signatures, checked by the system's verifier rather than in haul: the format is too large to parse
/// safely here, and `sqv` (Sequoia) and `gpgv` (GnuPG) are the verifiers Debian's own archive tooling trusts. Found
/// on `PATH` when asked, `sqv` first (it reads only detached signatures; `gpgv` also reads clear-signed messages).
///
/// The one module file that imports Glibc: running a verifier is a `posix_spawn`, and no library module has a
/// process runner to share (Foundation's `Process` is kept out of the library modules). The rest of the module is
/// pure.
package struct OpenPGPVerifier: Sendable, Hashable {
    package enum Tool: String, Sendable, Hashable {
        case sqv, gpgv
    }

    package let tool: Tool
    /// The executable's path, as found on the search path.
    package let path: String

    package init(tool: Tool, path: String) {
        (self.tool, self.path) = (tool, path)
    }

    /// The verifier to use: `sqv` if found, else `gpgv`; only `gpgv` when `clearSigned`. `searchPath`: a `PATH`
    /// value, the process's own when nil; its relative entries are skipped.
    package static func find(clearSigned: Bool = false, searchPath: String? = nil) -> OpenPGPVerifier? {
        let path = searchPath ?? getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        // Absolute folders only: an empty or relative entry would find a `gpgv` in the current folder, which may be
        // the very folder the files being checked were downloaded to.
        let folders = path.split(separator: ":").filter { $0.hasPrefix("/") }
        for tool in clearSigned ? [Tool.gpgv] : [.sqv, .gpgv] {
            for folder in folders {
                let candidate = "\(folder)/\(tool.rawValue)"
                if access(candidate, X_OK) == 0 { return OpenPGPVerifier(tool: tool, path: candidate) }
            }
        }
        return nil
    }

    /// Checks the detached signature in `signatureFile` of `dataFile` against the keys in `keyringFile` (an exported
    /// public key or keyring). The verifier chosen is `find`'s.
    package static func verifyDetached(
        signatureFile: String, dataFile: String, keyringFile: String, searchPath: String? = nil
    ) -> Result<OpenPGPVerified, OpenPGPFailure> {
        guard let verifier = find(searchPath: searchPath) else { return .failure(.verifierMissing) }
        return verifier.verifyDetached(signatureFile: signatureFile, dataFile: dataFile, keyringFile: keyringFile)
    }

    package func verifyDetached(
        signatureFile: String, dataFile: String, keyringFile: String
    )
        -> Result<OpenPGPVerified, OpenPGPFailure>
    {
        let arguments = ["--keyring", Self.pathArgument(keyringFile), Self.pathArgument(signatureFile)]
        return run(arguments + [Self.pathArgument(dataFile)], readOutput: false).map { _ in
            OpenPGPVerified(verifier: self, signedText: nil)
        }
    }

    /// Checks a clear-signed message (`gpg --clearsign`) against the keys in `keyringFile`, by `gpgv`. What is
    /// returned is the text `gpgv` reports as signed (its `--output`), never the file: lines before or after the
    /// signed part, which anyone could have added, are not in it.
    package static func verifyClearSigned(
        messageFile: String, keyringFile: String, searchPath: String? = nil
    )
        -> Result<OpenPGPVerified, OpenPGPFailure>
    {
        guard let verifier = find(clearSigned: true, searchPath: searchPath) else { return .failure(.verifierMissing) }
        return verifier.verifyClearSigned(messageFile: messageFile, keyringFile: keyringFile)
    }

    package func verifyClearSigned(messageFile: String, keyringFile: String) -> Result<OpenPGPVerified, OpenPGPFailure>
    {
        guard tool == .gpgv else { return .failure(.verifierMissing) }
        let arguments = ["--keyring", Self.pathArgument(keyringFile), "--output", "-", Self.pathArgument(messageFile)]
        return run(arguments, readOutput: true).map { OpenPGPVerified(verifier: self, signedText: $0) }
    }

    /// A path the verifier cannot mistake for an option, nor (gpgv) for a keyring's name in its home folder: a
    /// relative path gets a `./`.
    private static func pathArgument(_ path: String) -> String {
        path.hasPrefix("/") ? path : "./\(path)"
    }

    /// Runs the verifier with stdin and stderr on /dev/null, and its stdout read whole when `readOutput` (else on
    /// /dev/null too); what it printed, if it exited 0.
    private func run(_ arguments: [String], readOutput: Bool) -> Result<[UInt8], OpenPGPFailure> {
        var pipeEnds: [Int32] = [-1, -1]
        if readOutput {
            // Close-on-exec, so that no other child keeps the pipe open (Glibc's Swift module has no pipe2).
            guard pipe(&pipeEnds) == 0 else { return .failure(.couldNotRun(path: path, errno: errno)) }
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if readOutput {
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)

        // The child starts with default signal handling and nothing blocked, whatever haul's threads did to theirs.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        if readOutput { close(pipeEnds[1]) }
        guard spawned == 0 else {
            if readOutput { close(pipeEnds[0]) }
            return .failure(.couldNotRun(path: path, errno: spawned))
        }

        var output: [UInt8] = []
        if readOutput {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
                if count > 0 {
                    output += chunk.prefix(count)
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            close(pipeEnds[0])
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return .failure(.couldNotRun(path: path, errno: errno)) }
        }
        // The wait status's layout (WIFEXITED and WEXITSTATUS are macros Swift does not import).
        guard status & 0x7f == 0 else { return .failure(.killed(path: path, signal: status & 0x7f)) }
        let exitStatus = (status >> 8) & 0xff
        return exitStatus == 0 ? .success(output) : .failure(.rejected(path: path, exitStatus: exitStatus))
    }
}

/// An OpenPGP signature the system's verifier accepted.
package struct OpenPGPVerified: Sendable, Hashable {
    package let verifier: OpenPGPVerifier
    /// A clear-signed message's signed text, as the verifier output it; nil for a detached signature.
    package let signedText: [UInt8]?
}

package enum OpenPGPFailure: Error, Sendable, Hashable {
    /// Neither `sqv` nor `gpgv` (for a clear-signed message: no `gpgv`) is on the search path.
    case verifierMissing
    /// The verifier ran and refused: a bad signature, a key not in the keyring, or unreadable input (verifiers
    /// do not tell these apart in their exit status).
    case rejected(path: String, exitStatus: Int32)
    /// The verifier was killed by this signal.
    case killed(path: String, signal: Int32)
    /// The verifier could not be started (or waited for): the errno.
    case couldNotRun(path: String, errno: Int32)
}

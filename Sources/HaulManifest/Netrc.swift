#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HaulFileSystem

/// A `.netrc` file: a login and password per host, as curl, wget and ftp read it.
///
/// ```
/// machine artifacts.internal login ci password "s3cr3t with spaces"
/// default login anonymous password guest
/// ```
///
/// Tokens are separated by white space; `machine NAME` starts a host's entry, `default` the entry for every other
/// host (the first matching entry wins). `login`, `password` and `account` take a value; `macdef NAME` starts a
/// macro that runs to the next empty line (skipped). A value may be double-quoted, with `\"`, `\\`, `\n`, `\r`, `\t`
/// inside, as curl reads it; `#` starts a comment that runs to the end of its line. Anything else is an error with
/// its line and column: a credentials file read wrongly would send the wrong secret, or none, without a word.
///
/// Values only: reading the file is the one thing here that touches the system.
package struct Netrc: Sendable {
    package struct Credentials: Sendable, Equatable {
        package var login: String
        package var password: String

        package init(login: String, password: String) {
            self.login = login
            self.password = password
        }
    }

    /// The file as the user named it, for messages.
    package var file: String
    /// By host, lower-cased: the first entry of each.
    private var machines: [String: Credentials]
    private var fallback: Credentials?

    /// The file's credentials for `host` (compared without ASCII case), else its `default`'s; nil: none. An entry
    /// without `login` gives none: there is nobody to log in as.
    package func credentials(forHost host: String) -> Credentials? {
        machines[Self.asciiLowercased(host)] ?? fallback
    }

    /// A large `.netrc` is a few kilobytes; anything far larger is a mistake (or `/dev/zero`).
    package static let maximumBytes = 1 << 20

    /// Where the file is: `NETRC` when set and not empty (then it must exist), else `~/.netrc` (then a missing
    /// file is no credentials, as curl's `--netrc-optional`).
    package static func load(environment: [String: String]) throws(NetrcError) -> Netrc {
        let named = environment["NETRC"].flatMap { $0.isEmpty ? nil : $0 }
        guard let path = named ?? environment["HOME"].flatMap({ $0.isEmpty ? nil : $0 + "/.netrc" }) else {
            return Netrc(file: "~/.netrc", machines: [:], fallback: nil)
        }
        switch BoundedRead.file(path, limit: maximumBytes) {
        case .success(let bytes):
            return try parse(bytes, file: path)
        case .failure(let failure):
            if failure.isMissing, named == nil { return Netrc(file: path, machines: [:], fallback: nil) }
            let reason =
                switch failure {
                case .tooLarge: "larger than 1 MiB"
                case .system(let code): Errno(code).description
                }
            throw NetrcError(
                file: path, location: nil,
                message: "cannot read the .netrc file\(named == nil ? "" : " (NETRC)"): \(reason)")
        }
    }

    package static func parse(_ bytes: [UInt8], file: String) throws(NetrcError) -> Netrc {
        var tokens = Tokens(bytes)
        var machines: [String: Credentials] = [:]
        var fallback: Credentials?
        /// The entry being read: its host (nil for `default`), and what it said so far.
        var entry: (host: String?, login: String?, password: String?)?

        func finish() {
            guard let done = entry, let login = done.login else { return }
            let credentials = Credentials(login: login, password: done.password ?? "")
            if let host = done.host {
                if machines[host] == nil { machines[host] = credentials }
            } else if fallback == nil {
                fallback = credentials
            }
        }

        while let token = try tokens.next(file: file) {
            func value() throws(NetrcError) -> String {
                guard let value = try tokens.next(file: file) else {
                    throw NetrcError(file: file, location: token.location, message: "\"\(token.text)\" has no value")
                }
                return value.text
            }
            switch token.text {
            case "machine":
                finish()
                entry = (host: asciiLowercased(try value()), login: nil, password: nil)
            case "default":
                finish()
                entry = (host: nil, login: nil, password: nil)
            case "login", "password", "account":
                guard entry != nil else {
                    throw NetrcError(
                        file: file, location: token.location,
                        message: "\"\(token.text)\" before any \"machine\" or \"default\"")
                }
                let text = try value()
                if token.text == "login" { entry?.login = text }
                if token.text == "password" { entry?.password = text }
            case "macdef":
                _ = try value()
                tokens.skipMacro()
            default:
                // Not quoted: it may be the second word of a password written without its quotes.
                throw NetrcError(
                    file: file, location: token.location,
                    message: "a word that is not a keyword where one was expected (machine, default, login, "
                        + "password, account or macdef); a value with spaces must be in double quotes")
            }
        }
        finish()
        return Netrc(file: file, machines: machines, fallback: fallback)
    }

    private static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    /// The file's words, with where each starts.
    private struct Tokens {
        struct Token {
            var text: String
            var location: SourceLocation
        }

        private let bytes: [UInt8]
        private var index = 0
        private var line = 1
        private var lineStart = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        private var location: SourceLocation { SourceLocation(line: line, column: index - lineStart + 1) }

        private mutating func advance() {
            if bytes[index] == UInt8(ascii: "\n") {
                line += 1
                lineStart = index + 1
            }
            index += 1
        }

        private static func isSpace(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
                || byte == UInt8(ascii: "\r")
        }

        mutating func next(file: String) throws(NetrcError) -> Token? {
            while index < bytes.count {
                if Self.isSpace(bytes[index]) {
                    advance()
                } else if bytes[index] == UInt8(ascii: "#") {
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { advance() }
                } else {
                    break
                }
            }
            guard index < bytes.count else { return nil }
            let start = location
            var text: [UInt8] = []
            if bytes[index] == UInt8(ascii: "\"") {
                advance()
                while true {
                    guard index < bytes.count, bytes[index] != UInt8(ascii: "\n") else {
                        throw NetrcError(
                            file: file, location: start, message: "a quoted value is not closed on its line")
                    }
                    let byte = bytes[index]
                    advance()
                    if byte == UInt8(ascii: "\"") { break }
                    guard byte == UInt8(ascii: "\\"), index < bytes.count else {
                        text.append(byte)
                        continue
                    }
                    let escaped = bytes[index]
                    advance()
                    switch escaped {
                    case UInt8(ascii: "n"): text.append(UInt8(ascii: "\n"))
                    case UInt8(ascii: "r"): text.append(UInt8(ascii: "\r"))
                    case UInt8(ascii: "t"): text.append(UInt8(ascii: "\t"))
                    default: text.append(escaped)
                    }
                }
            } else {
                while index < bytes.count, !Self.isSpace(bytes[index]) {
                    text.append(bytes[index])
                    advance()
                }
            }
            return Token(text: String(decoding: text, as: UTF8.self), location: start)
        }

        /// Past a `macdef`'s body: up to and including the next empty line.
        mutating func skipMacro() {
            while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { advance() }
            while index < bytes.count {
                advance()
                if index < bytes.count, bytes[index] == UInt8(ascii: "\n") {
                    advance()
                    return
                }
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n") { advance() }
            }
        }
    }
}

/// A `.netrc` that could not be read or understood: where, and what to fix. It never quotes a value.
package struct NetrcError: Error, Sendable, CustomStringConvertible {
    package var diagnostic: Diagnostic

    init(file: String, location: SourceLocation?, message: String) {
        diagnostic = Diagnostic(severity: .error, file: file, location: location, keyPath: nil, message: message)
    }

    package var description: String { diagnostic.description }
}

import ArgumentParser
import Glibc
import Haul
import HaulManifest

/// The CA bundle a run verifies TLS against, checked before anything is fetched: libcurl would only find out at
/// the first https handshake, and say "error setting certificate file" about every URL. A missing, unreadable,
/// empty or non-PEM file is a usage error (exit 64) with one message, whichever way it was given, naming the file
/// and where it came from.
struct CABundle {
    let path: String
    /// `--ca-file` or the variable it came from.
    let origin: String

    /// Where a bundle may be named, first to last: haul's own, then the variables curl and OpenSSL users already
    /// set (a corporate proxy's CA is often given to every tool this way). An empty variable names nothing.
    static let variables = ["HAUL_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"]

    /// The option, else the first variable set; nil: the system's bundle.
    static func resolve(option: String?, environment: [String: String] = Environment.current) -> CABundle? {
        if let option { return CABundle(path: option, origin: "--ca-file") }
        for variable in variables {
            if let value = environment[variable], !value.isEmpty { return CABundle(path: value, origin: variable) }
        }
        return nil
    }

    /// Prints the problem and exits 64 when the bundle cannot be used.
    func validate() throws {
        guard let problem = problem() else { return }
        Output.errors([
            "error: CA bundle \(String(reflecting: path)) (from \(origin)) cannot be used: \(problem); "
                + "give a readable file of PEM certificates"
        ])
        throw ExitCode(ExitStatus.usage.rawValue)
    }

    /// Bundles are a few hundred KiB; anything past this is not read (a PEM block is found long before).
    private static let readLimit = 16 << 20
    private static let markers = ["-----BEGIN CERTIFICATE-----", "-----BEGIN TRUSTED CERTIFICATE-----"].map {
        Array($0.utf8)
    }

    /// Why the file is no CA bundle, or nil.
    func problem() -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return ReadableFile.describe(errno) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while bytes.count < Self.readLimit {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return ReadableFile.describe(errno)
            }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        if bytes.isEmpty { return "the file is empty" }
        guard Self.markers.contains(where: { Self.contains(bytes, $0) }) else {
            return "no PEM certificate in it (no \"-----BEGIN CERTIFICATE-----\" line)"
        }
        return nil
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count, let first = needle.first else { return false }
        var index = 0
        while index + needle.count <= haystack.count {
            if haystack[index] == first, haystack[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}

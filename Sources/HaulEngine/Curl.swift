import CCurl

/// The few libcurl calls haul makes, typed. libcurl's variadic setters go through the C shims in `CCurl`.
/// Handles are owned by one thread (the engine loop) at a time.
enum Curl {
    /// `curl_global_init` is not thread-safe; run it once, before any handle exists.
    static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()
}

/// A URL a server redirected to, as messages may show it: scheme, host, port and path, without userinfo, and
/// with any query shown as `?…` (a pre-signed URL's query is a credential).
enum RedirectedURL {
    static func display(_ url: String) -> String {
        guard let handle = curl_url() else { return "(redirect target)" }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return "(redirect target)" }
        func part(_ which: CURLUPart) -> String? {
            var pointer: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &pointer, 0) == CURLUE_OK, let pointer else { return nil }
            defer { curl_free(pointer) }
            return String(cString: pointer)
        }
        let port = part(CURLUPART_PORT).map { ":" + $0 } ?? ""
        let query = part(CURLUPART_QUERY) == nil ? "" : "?…"
        return
            "\(part(CURLUPART_SCHEME) ?? "?")://\(part(CURLUPART_HOST) ?? "?")\(port)\(part(CURLUPART_PATH) ?? "/")\(query)"
    }
}

/// The libcurl this process runs with, as `haul --version` reports it: its version, its TLS library, and whether it
/// speaks HTTP/2 (what a bug report needs, and what differs between distributions).
package enum CurlLibrary {
    package static var description: String {
        guard let info = haul_curl_version_info()?.pointee else { return "libcurl (version unknown)" }
        let text = { (pointer: UnsafePointer<CChar>?) in pointer.map { String(cString: $0) } }
        var parts = ["libcurl \(text(info.version) ?? "?")"]
        if let tls = text(info.ssl_version) { parts.append(tls) }
        let http2 = info.features & Int32(CURL_VERSION_HTTP2) != 0
        parts.append(http2 ? "HTTP/2 (\(text(info.nghttp2_version).map { "nghttp2/" + $0 } ?? "yes"))" : "no HTTP/2")
        return parts.joined(separator: ", ")
    }
}

/// An easy handle, reset and reused across transfers so that thousands of small files do not each allocate one.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    /// libcurl writes the human-readable cause of a failure here; it must outlive the transfer.
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private var headerList: UnsafeMutablePointer<curl_slist>?

    init?() {
        _ = Curl.globalInit
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    func reset() {
        curl_easy_reset(raw)
        curl_slist_free_all(headerList)
        headerList = nil
        errorBuffer[0] = 0
        refusal = nil
    }

    /// Lets a transfer its write callback paused (`Transfer.receive`) go on: libcurl hands over the chunk it kept, at once.
    func resumeReceiving() {
        _ = curl_easy_pause(raw, CURLPAUSE_CONT)
    }

    /// The first option libcurl refused since the last reset (one this libcurl lacks, out of memory), as the
    /// reason the transfer fails: a request must never go out half-configured, with a protocol or TLS restriction
    /// silently missing.
    private(set) var refusal: FailureReason?

    func set(_ option: CURLoption, _ value: Int) { check(haul_easy_setopt_long(raw, option, value), option) }
    func set(_ option: CURLoption, _ value: Bool) { set(option, value ? 1 : 0) }
    /// libcurl copies the string.
    func set(_ option: CURLoption, _ value: String) { check(haul_easy_setopt_string(raw, option, value), option) }
    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) {
        check(haul_easy_setopt_pointer(raw, option, pointer), option)
    }

    /// Replaces the request headers; the list lives until the next reset.
    func setHeaders(_ lines: [String]) {
        curl_slist_free_all(headerList)
        headerList = nil
        for line in lines { headerList = curl_slist_append(headerList, line) }
        check(haul_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headerList), CURLOPT_HTTPHEADER)
    }

    /// Routes this handle's body, headers, progress and socket creation to the engine's callbacks, each given
    /// `context` (the transfer, unretained: the engine keeps it alive while the handle is in the multi).
    func setCallbacks(
        context: UnsafeMutableRawPointer, write: TransferCallbacks.Data, header: TransferCallbacks.Data,
        progress: TransferCallbacks.Progress, openSocket: TransferCallbacks.OpenSocket
    ) {
        check(haul_easy_setopt_write_callback(raw, write), CURLOPT_WRITEFUNCTION)
        set(CURLOPT_WRITEDATA, pointer: context)
        check(haul_easy_setopt_header_callback(raw, header), CURLOPT_HEADERFUNCTION)
        set(CURLOPT_HEADERDATA, pointer: context)
        check(haul_easy_setopt_xferinfo_callback(raw, progress), CURLOPT_XFERINFOFUNCTION)
        set(CURLOPT_XFERINFODATA, pointer: context)
        set(CURLOPT_NOPROGRESS, false)
        check(haul_easy_setopt_opensocket_callback(raw, openSocket), CURLOPT_OPENSOCKETFUNCTION)
        set(CURLOPT_OPENSOCKETDATA, pointer: context)
    }

    /// A size hint for libcurl's receive buffer. The one option whose refusal is not a failure: libcurl refuses a
    /// new size on a reused handle whose buffer it has already allocated (CURLE_BAD_FUNCTION_ARGUMENT), and
    /// the transfer then runs with the buffer the handle has.
    func preferReceiveBuffer(bytes: Int) { _ = haul_easy_setopt_long(raw, CURLOPT_BUFFERSIZE, bytes) }

    private func check(_ result: CURLcode, _ option: CURLoption) {
        guard result != CURLE_OK, refusal == nil else { return }
        refusal = .network(
            code: CurlCode(result), message: "libcurl refused option \(option.rawValue): \(result.message)")
    }

    /// The status a proxy answered a CONNECT with (0 when there was no tunnel): a 407 there fails the transfer
    /// before any response of the origin.
    var connectCode: Int {
        var code = 0
        guard haul_easy_getinfo_long(raw, CURLINFO_HTTP_CONNECTCODE, &code) == CURLE_OK else { return 0 }
        return code
    }

    /// The HTTP version of the last response: "1.0", "1.1", "2", "3"; nil before one.
    var httpVersion: String? {
        var value = 0
        guard haul_easy_getinfo_long(raw, CURLINFO_HTTP_VERSION, &value) == CURLE_OK else { return nil }
        switch value {
        case Int(CURL_HTTP_VERSION_1_0): return "1.0"
        case Int(CURL_HTTP_VERSION_1_1): return "1.1"
        case Int(CURL_HTTP_VERSION_2_0): return "2"
        case 30: return "3"  // CURL_HTTP_VERSION_3, absent from older headers
        default: return nil
        }
    }

    /// The absolute target of a 3xx answer's `Location`, resolved against the request URL.
    var redirectURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard haul_easy_getinfo_string(raw, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else {
            return nil
        }
        return String(cString: pointer)
    }

    var errorMessage: String { String(cString: errorBuffer) }
}

/// A multi handle: one connection cache and DNS cache shared by every transfer of a run.
final class MultiHandle {
    let raw: UnsafeMutableRawPointer

    /// Nil when libcurl cannot make one or refuses one of `limits` (connection limits a run must not exceed).
    init?(limits: [(CURLMoption, Int)]) {
        _ = Curl.globalInit
        guard let raw = curl_multi_init() else { return nil }
        for (option, value) in limits where haul_multi_setopt_long(raw, option, value) != CURLM_OK {
            curl_multi_cleanup(raw)
            return nil
        }
        self.raw = raw
    }

    deinit { curl_multi_cleanup(raw) }

    /// Fails only for a handle already added or a handle that is not one (CURLM_ADDED_ALREADY, CURLM_BAD_EASY_HANDLE),
    /// which the engine's bookkeeping rules out; out of memory is the one real case, reported as the transfer's failure.
    func add(_ easy: EasyHandle) -> FailureReason? {
        let result = curl_multi_add_handle(raw, easy.raw)
        guard result != CURLM_OK else { return nil }
        return .network(
            code: CurlCode(CURLE_OUT_OF_MEMORY),
            message: "libcurl could not start the transfer: \(String(cString: curl_multi_strerror(result)))")
    }
    func remove(_ easy: EasyHandle) { curl_multi_remove_handle(raw, easy.raw) }

    /// Drives every transfer as far as it can go without blocking.
    func perform() {
        var running: Int32 = 0
        curl_multi_perform(raw, &running)
    }

    /// Sleeps until a socket is ready, `wakeUp()` is called, or `milliseconds` pass.
    func poll(milliseconds: Int32) {
        var ready: Int32 = 0
        curl_multi_poll(raw, nil, 0, milliseconds, &ready)
    }

    var wakeUpHandle: WakeUp { WakeUp(raw: raw) }

    /// Lets another thread interrupt `poll`. curl_multi_wakeup is the one multi call documented as thread-safe.
    /// The caller must make sure the handle outlives the call (see `TrailingDigests.add`).
    struct WakeUp: @unchecked Sendable {
        let raw: UnsafeMutableRawPointer
        func wake() { curl_multi_wakeup(raw) }
    }

    /// Finished transfers and their result codes. The message is copied before the handle can be removed.
    func completed() -> [(easy: UnsafeMutableRawPointer, result: CURLcode)] {
        var out: [(UnsafeMutableRawPointer, CURLcode)] = []
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(raw, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            out.append((easy, message.pointee.data.result))
        }
        return out
    }
}

extension CURLcode {
    var message: String { String(cString: curl_easy_strerror(self)) }
}

extension CurlCode {
    init(_ code: CURLcode) { self.init(rawValue: Int(code.rawValue)) }
}

/// The C signatures of the callbacks `EasyHandle.setCallbacks` installs.
enum TransferCallbacks {
    typealias Data = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
    typealias Progress =
        @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32
    typealias OpenSocket =
        @convention(c) (UnsafeMutableRawPointer?, curlsocktype, UnsafeMutablePointer<curl_sockaddr>?)
        -> curl_socket_t
}

/// Scheme, host and port of a URL, parsed by libcurl's own URL parser so that haul and libcurl agree on
/// what a URL means. Two URLs share credentials only when their origins are equal.
package struct URLOrigin: Equatable {
    var scheme: String
    /// Empty for URLs without an authority (`file:///etc/passwd`).
    package var host: String
    var port: String
    /// The URL names a user (`https://user:secret@host/`): libcurl logs in with it.
    package var hasUserinfo: Bool

    package init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        // NON_SUPPORT_SCHEME: parse any scheme, so that a refusal can name it.
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK else {
            return nil
        }
        func part(_ which: CURLUPart, _ flags: UInt32 = 0) -> String? {
            var pointer: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &pointer, flags) == CURLUE_OK, let pointer else { return nil }
            defer { curl_free(pointer) }
            return String(cString: pointer)
        }
        guard let scheme = part(CURLUPART_SCHEME) else { return nil }
        self.scheme = Self.asciiLowercased(scheme)
        // ASCII case-folding only: Unicode lowercasing would make "K" (Kelvin sign) equal "k".
        self.host = part(CURLUPART_HOST).map(Self.asciiLowercased) ?? ""
        self.port = part(CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)) ?? ""
        self.hasUserinfo = part(CURLUPART_USER) != nil
    }

    /// The same origin: scheme, host and port (who logs in is not part of it).
    package static func == (a: URLOrigin, b: URLOrigin) -> Bool {
        a.scheme == b.scheme && a.host == b.host && a.port == b.port
    }

    private static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}

/// Resolves a `Location` header against the URL that sent it, with libcurl's parser. Used when libcurl did not
/// (it computes the redirect URL only for a transfer it completed, not one haul cut short).
func resolveRedirect(_ location: String, against base: String) -> String? {
    guard let handle = curl_url() else { return nil }
    defer { curl_url_cleanup(handle) }
    let flags = UInt32(CURLU_NON_SUPPORT_SCHEME)
    guard curl_url_set(handle, CURLUPART_URL, base, flags) == CURLUE_OK,
        curl_url_set(handle, CURLUPART_URL, location, flags) == CURLUE_OK
    else { return nil }
    var pointer: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, CURLUPART_URL, &pointer, 0) == CURLUE_OK, let pointer else { return nil }
    defer { curl_free(pointer) }
    return String(cString: pointer)
}

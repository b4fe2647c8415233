import CCurl

/// The few libcurl calls haul makes, typed. libcurl's variadic setters go through the C shims in `CCurl`.
/// Handles are owned by one thread (the engine loop) at a time.
enum Curl {
    /// `curl_global_init` is not thread-safe; run it once, before any handle exists.
    static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    static var version: String { String(cString: curl_version()) }
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
    }

    func set(_ option: CURLoption, _ value: Int) { _ = haul_easy_setopt_long(raw, option, value) }
    func set(_ option: CURLoption, _ value: Bool) { set(option, value ? 1 : 0) }
    func set(_ option: CURLoption, _ value: String) { _ = haul_easy_setopt_string(raw, option, value) }  // libcurl copies strings
    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) { _ = haul_easy_setopt_pointer(raw, option, pointer) }

    /// Replaces the request headers; the list lives until the next reset.
    func setHeaders(_ lines: [String]) {
        curl_slist_free_all(headerList)
        headerList = nil
        for line in lines { headerList = curl_slist_append(headerList, line) }
        _ = haul_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headerList)
    }

    /// The status a proxy answered a CONNECT with (0 when there was no tunnel): a 407 there fails the transfer
    /// before any response of the origin.
    var connectCode: Int {
        var code = 0
        _ = haul_easy_getinfo_long(raw, CURLINFO_HTTP_CONNECTCODE, &code)
        return code
    }

    /// The absolute target of a 3xx answer's `Location`, resolved against the request URL.
    var redirectURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard haul_easy_getinfo_string(raw, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(cString: pointer)
    }

    var errorMessage: String { String(cString: errorBuffer) }
}

/// A multi handle: one connection cache and DNS cache shared by every transfer of a run.
final class MultiHandle {
    let raw: UnsafeMutableRawPointer

    init?() {
        _ = Curl.globalInit
        guard let raw = curl_multi_init() else { return nil }
        self.raw = raw
    }

    deinit { curl_multi_cleanup(raw) }

    func set(_ option: CURLMoption, _ value: Int) { _ = haul_multi_setopt_long(raw, option, value) }
    func add(_ easy: EasyHandle) { curl_multi_add_handle(raw, easy.raw) }
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

/// Scheme, host and port of a URL, parsed by libcurl's own URL parser so that haul and libcurl agree on
/// what a URL means. Two URLs share credentials only when their origins are equal.
struct URLOrigin: Equatable {
    var scheme: String
    /// Empty for URLs without an authority (`file:///etc/passwd`).
    var host: String
    var port: String

    init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        // NON_SUPPORT_SCHEME: parse any scheme, so that a refusal can name it.
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK else { return nil }
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
          curl_url_set(handle, CURLUPART_URL, location, flags) == CURLUE_OK else { return nil }
    var pointer: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, CURLUPART_URL, &pointer, 0) == CURLUE_OK, let pointer else { return nil }
    defer { curl_free(pointer) }
    return String(cString: pointer)
}

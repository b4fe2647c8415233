import HaulDigest
import HaulEngine
import HaulManifest

extension TransferSource {
    /// The source with the login and password `netrc` lists for its own host, as `Authorization: Basic`. Like
    /// every source header it goes to this origin only, never across a redirect to another. Credentials the source
    /// already has win: its own `Authorization` header, or userinfo in its URL. Both values become secrets, never
    /// printed.
    func authenticated(by netrc: Netrc?) -> TransferSource {
        guard let netrc, let origin = URLOrigin(url), !origin.hasUserinfo,
            !headers.contains(where: { $0.name.utf8.count == 13 && $0.name.lowercased() == "authorization" }),
            let credentials = netrc.credentials(forHost: origin.host)
        else { return self }
        var source = self
        let value = "Basic " + Base64.encode(Array("\(credentials.login):\(credentials.password)".utf8))
        source.headers.append(HTTPHeader(name: "Authorization", value: value))
        source.secrets +=
            [value, String(value.dropFirst(6))] + (credentials.password.isEmpty ? [] : [credentials.password])
        return source
    }
}

// Typed wrappers for libcurl's variadic functions, which Swift cannot call, and for the version macro it cannot
// import. Nothing else lives here.
#ifndef HAUL_CCURL_SHIM_H
#define HAUL_CCURL_SHIM_H
#include <curl/curl.h>

static inline CURLcode haul_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode haul_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode haul_easy_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode haul_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode haul_easy_setopt_write_callback(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f);
}
static inline CURLcode haul_easy_setopt_header_callback(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f);
}
static inline CURLcode haul_easy_setopt_xferinfo_callback(CURL *h, int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f);
}
static inline CURLcode haul_easy_setopt_opensocket_callback(CURL *h, curl_socket_t (*f)(void *, curlsocktype, struct curl_sockaddr *)) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f);
}
static inline CURLcode haul_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode haul_easy_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode haul_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline curl_version_info_data *haul_curl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }

#endif

//! Label values of the standard families (SPEC.md): bounded sets, so that no client input creates series.

/// The `route` of a request that matched no route.
pub const UNMATCHED_ROUTE: &str = "<unmatched>";

/// The `method` values, in the index order of [`method_index`]; the last one is for anything else.
pub const METHODS: [&str; 10] = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "OTHER"];

/// The `status_class` values, in the index order of [`class_index`].
pub const STATUS_CLASSES: [&str; 7] = ["1xx", "2xx", "3xx", "4xx", "5xx", "error", "other"];

/// Index of `method` in [`METHODS`]: one of the nine standard methods as given (upper case, as HTTP methods are
/// case-sensitive), anything else is `OTHER`.
#[inline]
pub fn method_index(method: &str) -> usize {
    match method.as_bytes() {
        b"GET" => 0,
        b"HEAD" => 1,
        b"POST" => 2,
        b"PUT" => 3,
        b"DELETE" => 4,
        b"CONNECT" => 5,
        b"OPTIONS" => 6,
        b"TRACE" => 7,
        b"PATCH" => 8,
        _ => 9,
    }
}

/// The `method` label value: the method itself if it is one of `GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE
/// PATCH`, else `OTHER`.
#[inline]
pub fn method_label(method: &str) -> &'static str {
    METHODS[method_index(method)]
}

/// Index of the status class in [`STATUS_CLASSES`].
#[inline]
pub fn class_index(status: u32) -> usize {
    match status {
        0 => 5,
        100..=599 => (status / 100 - 1) as usize,
        _ => 6,
    }
}

/// The `status_class` label value: `1xx` … `5xx` for 100–599, `error` for 0 (no response: refused, reset, timed
/// out), `other` for anything else.
#[inline]
pub fn status_class(status: u32) -> &'static str {
    STATUS_CLASSES[class_index(status)]
}

/// The client's `host` label value for a host and port: `host:port`, an IPv6 address in brackets, the host in
/// lower case.
pub fn host_port_label(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The client's `host` label value for a URL: `host:port`, the host in lower case, an IPv6 address in brackets,
/// the port always written — 80 for `http`/`ws`, 443 for `https`/`wss` when the URL has none (or a bad one), 0 for
/// other schemes (as the Python and D implementations write it).
pub fn host_label(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((addr, after)) => (addr, after.strip_prefix(':')),
            None => (v6, None),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = port
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| match scheme.to_ascii_lowercase().as_str() {
            "http" | "ws" => 80,
            "https" | "wss" => 443,
            _ => 0,
        });
    host_port_label(host, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods() {
        for m in &METHODS[..9] {
            assert_eq!(method_label(m), *m);
        }
        for m in ["get", "PROPFIND", "BREW", "", "GET ", "OTHER", "Get"] {
            assert_eq!(method_label(m), "OTHER", "{m:?}");
        }
    }

    #[test]
    fn status_classes() {
        let cases = [
            (0, "error"),
            (1, "other"),
            (99, "other"),
            (100, "1xx"),
            (101, "1xx"),
            (199, "1xx"),
            (200, "2xx"),
            (204, "2xx"),
            (301, "3xx"),
            (404, "4xx"),
            (418, "4xx"),
            (500, "5xx"),
            (599, "5xx"),
            (600, "other"),
            (999, "other"),
            (u32::MAX, "other"),
        ];
        for (s, c) in cases {
            assert_eq!(status_class(s), c, "{s}");
        }
    }

    #[test]
    fn hosts() {
        let cases = [
            ("http://example.org/x", "example.org:80"),
            ("https://example.org", "example.org:443"),
            ("HTTPS://Example.ORG?q=1", "example.org:443"),
            ("https://Example.ORG:8443/a?b#c", "example.org:8443"),
            ("http://user:pw@127.0.0.1:8080/", "127.0.0.1:8080"),
            ("http://[::1]/", "[::1]:80"),
            ("https://[::1]:9443/x", "[::1]:9443"),
            ("wss://[::1]:9000/ws", "[::1]:9000"),
            ("ws://h", "h:80"),
            ("wss://h?x", "h:443"),
            ("http://h:/", "h:80"),
            ("ftp://h/", "h:0"),
            ("ftp://h:21/", "h:21"),
            ("http://h:99999/", "h:80"),
            ("https://h:8x/", "h:443"),
        ];
        for (url, want) in cases {
            assert_eq!(host_label(url), want, "{url}");
        }
        assert_eq!(host_port_label("::1", 80), "[::1]:80");
        assert_eq!(host_port_label("[::1]", 80), "[::1]:80");
        assert_eq!(host_port_label("Host", 1), "host:1");
    }
}

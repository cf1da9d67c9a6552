/**
 * Label values of the standard families (SPEC.md): the method (nine names, anything else `OTHER`, so a hostile
 * client cannot create series), the status class (`1xx` … `5xx`, `error` for 0, `other`), the client's
 * `host:port`, and the escaping of label values and HELP texts.
 *
 * The method and the status class are small enums, so the request path turns them into a slot index with no
 * string work; the strings are used once, when the series are registered.
 */
module perfkit_metrics.labels;

/// RFC 9110's nine methods, in SPEC.md's order, then `OTHER`.
enum Method : ubyte { GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH, OTHER }
enum size_t methodCount = Method.max + 1;
immutable string[methodCount] methodLabels =
    ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "OTHER"];

/// `1xx` … `5xx`, `error` (status 0: no response), `other`.
enum StatusClass : ubyte { s1xx, s2xx, s3xx, s4xx, s5xx, error, other }
enum size_t statusClassCount = StatusClass.max + 1;
immutable string[statusClassCount] statusClassLabels = ["1xx", "2xx", "3xx", "4xx", "5xx", "error", "other"];

/// The route label of requests that matched no route.
enum string unmatchedRoute = "<unmatched>";

@safe pure nothrow @nogc
{
    /// The method as given when it is one of the nine (case-sensitive, as sent), else `OTHER`.
    Method methodOf(scope const(char)[] method)
    {
        foreach (i, name; methodLabels[0 .. $ - 1])
            if (method == name)
                return cast(Method) i;
        return Method.OTHER;
    }

    /// The label of a method given as text.
    string methodLabel(scope const(char)[] method) { return methodLabels[methodOf(method)]; }

    pragma(inline, true)
    StatusClass statusClassOf(long status)
    {
        if (status == 0)
            return StatusClass.error;
        if (status >= 100 && status <= 599)
            return cast(StatusClass)(status / 100 - 1);
        return StatusClass.other;
    }

    /// The status class label of a status code.
    string statusClass(long status) { return statusClassLabels[statusClassOf(status)]; }
}

/// `host:port` of a URL, the port always written (80 for http/ws, 443 for https/wss when the URL has none; 0
/// for another scheme), the host in lower case and an IPv6 host in brackets. Meant for start-up, when a
/// client registers the hosts it talks to.
string hostLabel(const(char)[] url) @safe pure
{
    import std.ascii : toLower;
    import std.string : indexOf;

    const schemeEnd = url.indexOf("://");
    const(char)[] scheme = schemeEnd >= 0 ? url[0 .. schemeEnd] : "";
    const(char)[] rest = schemeEnd >= 0 ? url[schemeEnd + 3 .. $] : url;
    foreach (i, c; rest)
        if (c == '/' || c == '?' || c == '#')
        {
            rest = rest[0 .. i];
            break;
        }
    const at = rest.indexOf('@');
    if (at >= 0)
        rest = rest[at + 1 .. $];
    const(char)[] host, port;
    if (rest.length && rest[0] == '[')
    {
        const close = rest.indexOf(']');
        host = close > 0 ? rest[1 .. close] : rest[1 .. $];
        if (close > 0 && close + 1 < rest.length && rest[close + 1] == ':')
            port = rest[close + 2 .. $];
    }
    else
    {
        const colon = rest.indexOf(':');
        host = colon >= 0 ? rest[0 .. colon] : rest;
        port = colon >= 0 ? rest[colon + 1 .. $] : null;
    }
    char[] h;
    foreach (c; host)
        h ~= toLower(c);
    if (host.indexOf(':') >= 0)
        h = "[" ~ h ~ "]";
    bool digits = port.length > 0 && port.length <= 5;
    foreach (c; port)
        digits = digits && c >= '0' && c <= '9';
    long p = 0;
    if (digits)
        foreach (c; port)
            p = p * 10 + (c - '0');
    if (!digits || p > 65_535)
    {
        p = 0;
        char[] s;
        foreach (c; scheme)
            s ~= toLower(c);
        if (s == "http" || s == "ws")
            p = 80;
        else if (s == "https" || s == "wss")
            p = 443;
    }
    import std.conv : to;
    return (h ~ ":" ~ p.to!string).idup;
}

/// A label value escaped for the exposition: `\`, `"` and newline as `\\`, `\"`, `\n`.
string escapeLabelValue(const(char)[] value) @safe pure nothrow
{
    char[] o;
    o.reserve(value.length);
    foreach (c; value)
    {
        if (c == '\\')
            o ~= `\\`;
        else if (c == '"')
            o ~= `\"`;
        else if (c == '\n')
            o ~= `\n`;
        else
            o ~= c;
    }
    return o.idup;
}

/// A HELP text escaped: `\` and newline (text format); OpenMetrics escapes `"` too.
string escapeHelp(const(char)[] help, bool openMetrics) @safe pure nothrow
{
    char[] o;
    foreach (c; help)
    {
        if (c == '\\')
            o ~= `\\`;
        else if (c == '\n')
            o ~= `\n`;
        else if (c == '"' && openMetrics)
            o ~= `\"`;
        else
            o ~= c;
    }
    return o.idup;
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
bool isValidMetricName(const(char)[] name) @safe pure nothrow @nogc
{
    if (name.length == 0)
        return false;
    foreach (i, c; name)
    {
        const alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved), not `le` (the histogram's own label).
bool isValidLabelName(const(char)[] name) @safe pure nothrow @nogc
{
    if (name.length == 0 || name == "le" || (name.length >= 2 && name[0 .. 2] == "__"))
        return false;
    foreach (i, c; name)
    {
        const alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

unittest
{
    assert(methodOf("GET") == Method.GET && methodOf("PATCH") == Method.PATCH && methodOf("TRACE") == Method.TRACE);
    assert(methodLabel("get") == "OTHER" && methodLabel("PROPFIND") == "OTHER" && methodLabel("") == "OTHER");
    assert(methodLabel("CONNECT") == "CONNECT");
    assert(statusClass(200) == "2xx" && statusClass(101) == "1xx" && statusClass(599) == "5xx");
    assert(statusClass(100) == "1xx" && statusClass(0) == "error" && statusClass(99) == "other");
    assert(statusClass(600) == "other" && statusClass(-200) == "other");
}

unittest
{
    assert(hostLabel("http://example.org/x") == "example.org:80");
    assert(hostLabel("HTTPS://Example.ORG?q=1") == "example.org:443");
    assert(hostLabel("http://127.0.0.1:8080/a") == "127.0.0.1:8080");
    assert(hostLabel("http://[::1]/") == "[::1]:80");
    assert(hostLabel("wss://[::1]:9000/ws") == "[::1]:9000");
    assert(hostLabel("http://user:pw@h:81") == "h:81");
    assert(hostLabel("ftp://h") == "h:0");
}

unittest
{
    assert(escapeLabelValue(`route "quoted" \back\slash`) == `route \"quoted\" \\back\\slash`);
    assert(escapeLabelValue("line\none") == `line\none`);
    assert(escapeHelp("a \"b\" \\ c\nd", false) == `a "b" \\ c\nd`);
    assert(escapeHelp("a \"b\"", true) == `a \"b\"`);
    assert(isValidMetricName("http_server:x_1") && !isValidMetricName("1x") && !isValidMetricName("a-b"));
    assert(isValidLabelName("route") && !isValidLabelName("le") && !isValidLabelName("__x"));
    assert(!isValidLabelName("a b") && !isValidLabelName(""));
}

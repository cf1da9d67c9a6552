/**
 * A small router: static paths and `:param` segments.
 *
 * Routes are added at start-up (allocation is fine there); matching is @nogc
 * and hands out parameter values as slices of the request path. Static
 * routes compare the whole path at once; a HEAD request matches GET routes.
 */
module aurora.router;

import aurora.parser : Request, Method;
import aurora.response : Response;

enum maxParams = 8;

/// Path parameters of a matched route (slices of the request path).
/// Bytes of percent-decoded parameter values one request may hold (in the worker's Params: no allocation).
enum paramBytes = 1024;

struct Params
{
@nogc nothrow:
    const(char)[][maxParams] names;
    const(char)[][maxParams] values;   /// percent-decoded
    size_t count;
    private char[paramBytes] decoded;  // the values that needed decoding
    private size_t used;

    /// `part` percent-decoded: `part` itself when it has no '%'; else a copy in this struct's room,
    /// or null when an escape is malformed or the room is full (the route then does not match).
    private const(char)[] decode(return scope const(char)[] part) return
    {
        import std.ascii : isHexDigit;

        size_t i = 0;
        while (i < part.length && part[i] != '%')
            i++;
        if (i == part.length)
            return part;
        if (used + part.length > decoded.length)
            return null;
        const start = used;
        foreach (j; 0 .. i)
            decoded[used++] = part[j];
        while (i < part.length)
        {
            if (part[i] != '%')
            {
                decoded[used++] = part[i++];
                continue;
            }
            if (i + 2 >= part.length || !isHexDigit(part[i + 1]) || !isHexDigit(part[i + 2]))
                return null;
            decoded[used++] = cast(char)(hexValue(part[i + 1]) * 16 + hexValue(part[i + 2]));
            i += 3;
        }
        return decoded[start .. used];
    }

    /// The value of parameter `name`, or null.
    const(char)[] opIndex(const(char)[] name) const
    {
        foreach (i; 0 .. count)
            if (names[i] == name)
                return values[i];
        return null;
    }
}

alias Handler = void function(ref const Request req, ref Response res,
                              ref const Params params) @nogc nothrow;

struct Route
{
    Method method;
    string pattern;         /// the template, e.g. "/hello/:name" (the metrics label)
    string[] segments;      /// pattern split on '/' (without the leading empty one)
    bool isStatic;
    Handler handler;
    string allowHeader;     /// "Allow: GET, HEAD\r\n" for every route with this pattern
}

struct Match
{
    int route = -1;         /// index into Router.routes, -1 when none
    string allowHeader;     /// set when the path exists for other methods (405)
}

struct Router
{
    Route[] routes;
    /// "Allow: ...\r\n" with every method the server answers (the `OPTIONS *` response)
    string allowAll = "Allow: OPTIONS\r\n";

    /// Register a route; `pattern` must start with '/'.
    void add(Method method, string pattern, Handler handler)
    {
        assert(pattern.length && pattern[0] == '/', "route pattern must start with '/'");
        Route r;
        r.method = method;
        r.pattern = pattern;
        r.handler = handler;
        r.isStatic = true;
        size_t s = 1;
        foreach (i; 1 .. pattern.length + 1)
        {
            if (i == pattern.length || pattern[i] == '/')
            {
                auto seg = pattern[s .. i];
                if (seg.length && seg[0] == ':')
                {
                    assert(seg.length > 1, "empty parameter name");
                    r.isStatic = false;
                }
                r.segments ~= seg;
                s = i + 1;
            }
        }
        routes ~= r;
        // recompute the Allow header of every route sharing the pattern
        string allow = "Allow: ";
        bool first = true;
        foreach (ref o; routes)
            if (o.pattern == pattern)
            {
                allow ~= (first ? "" : ", ") ~ methodName(o.method);
                if (o.method == Method.GET)
                    allow ~= ", HEAD";
                first = false;
            }
        allow ~= "\r\n";
        foreach (ref o; routes)
            if (o.pattern == pattern)
                o.allowHeader = allow;
        // and the server-wide one, in the order of Method
        string all = "Allow: ";
        foreach (m; [Method.GET, Method.HEAD, Method.POST, Method.PUT, Method.DELETE, Method.PATCH])
        {
            bool has = false;
            foreach (ref o; routes)
                has = has || o.method == m || (m == Method.HEAD && o.method == Method.GET);
            if (has)
                all ~= methodName(m) ~ ", ";
        }
        allowAll = all ~ "OPTIONS\r\n";
    }

    /// Find the route for `method` and `path`; fills `params`.
    Match match(Method method, const(char)[] path, ref Params params) const @nogc nothrow
    {
        Match m;
        foreach (i, ref r; routes)
        {
            params.count = 0;
            params.used = 0;
            if (!(r.isStatic ? r.pattern == path : matchParams(r, path, params)))
                continue;
            if (r.method == method || (method == Method.HEAD && r.method == Method.GET))
            {
                m.route = cast(int) i;
                return m;
            }
            m.allowHeader = r.allowHeader;
        }
        params.count = 0;
        return m;
    }

    private static bool matchParams(ref const Route r, const(char)[] path,
                                    ref Params params) @nogc nothrow
    {
        if (path.length == 0 || path[0] != '/')
            return false;
        size_t pos = 1;
        foreach (si, seg; r.segments)
        {
            if (pos > path.length)
                return false;
            size_t e = pos;
            while (e < path.length && path[e] != '/')
                e++;
            const part = path[pos .. e];
            if (seg.length && seg[0] == ':')
            {
                if (part.length == 0 || params.count == maxParams)
                    return false;
                const value = params.decode(part);
                if (value is null)
                    return false;
                params.names[params.count] = seg[1 .. $];
                params.values[params.count] = value;
                params.count++;
            }
            else if (part != seg)
                return false;
            pos = e + 1;
            if (si + 1 == r.segments.length)
                return e == path.length;
        }
        return false;
    }
}

private uint hexValue(char c) pure nothrow @nogc
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

private string methodName(Method m) pure nothrow @nogc
{
    import aurora.parser : methodNames;
    return methodNames[m];
}

version (unittest)
{
    private void h1(ref const Request, ref Response, ref const Params) @nogc nothrow {}
    private void h2(ref const Request, ref Response, ref const Params) @nogc nothrow {}
}

unittest
{
    Router r;
    r.add(Method.GET, "/plaintext", &h1);
    r.add(Method.GET, "/users/:id/posts/:post", &h2);
    r.add(Method.POST, "/users/:id", &h1);
    r.add(Method.GET, "/", &h2);
    Params p;

    auto m = r.match(Method.GET, "/plaintext", p);
    assert(m.route == 0 && p.count == 0);
    m = r.match(Method.HEAD, "/plaintext", p);
    assert(m.route == 0);
    m = r.match(Method.GET, "/users/42/posts/7", p);
    assert(m.route == 1 && p["id"] == "42" && p["post"] == "7" && p["x"] is null);
    m = r.match(Method.POST, "/users/abc", p);
    assert(m.route == 2 && p["id"] == "abc");
    m = r.match(Method.GET, "/", p);
    assert(m.route == 3);

    // no match: trailing slash, empty param, extra segment, prefix only
    foreach (path; ["/plaintext/", "/users//posts/7", "/users/1/posts/7/x", "/users/1/posts",
                    "/plain", "/plaintextX", ""])
    {
        m = r.match(Method.GET, path, p);
        assert(m.route == -1 && m.allowHeader is null, path);
    }

    // 405: the path exists for another method
    m = r.match(Method.DELETE, "/plaintext", p);
    assert(m.route == -1 && m.allowHeader == "Allow: GET, HEAD\r\n");
    m = r.match(Method.GET, "/users/5", p);
    assert(m.route == -1 && m.allowHeader == "Allow: POST\r\n");

    assert(r.allowAll == "Allow: GET, HEAD, POST, OPTIONS\r\n");
    assert(Router.init.allowAll == "Allow: OPTIONS\r\n");
}

unittest
{   // parameters are percent-decoded into the Params' own room; malformed escapes do not match
    Router r;
    r.add(Method.GET, "/hello/:name", &h1);
    Params p;
    assert(r.match(Method.GET, "/hello/a%20b", p).route == 0 && p["name"] == "a b");
    assert(r.match(Method.GET, "/hello/%2Fetc%2fpasswd", p).route == 0 && p["name"] == "/etc/passwd");
    assert(r.match(Method.GET, "/hello/plain", p).route == 0 && p["name"] == "plain");
    foreach (bad; ["/hello/%", "/hello/a%2", "/hello/%zz", "/hello/%g0"])
        assert(r.match(Method.GET, bad, p).route == -1, bad);
    static immutable long_ = "/hello/" ~ "%41" ~ "a" ~ "%42";
    assert(r.match(Method.GET, long_, p).route == 0 && p["name"] == "AaB");
}

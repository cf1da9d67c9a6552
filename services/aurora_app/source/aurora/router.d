/**
 * The router: a tree of path segments built at start-up, matched without allocation.
 *
 * A route template is a path of segments:
 *   - `users`            a static segment, compared as sent (not percent-decoded);
 *   - `:id`              a parameter: any non-empty segment, percent-decoded;
 *   - `:id<int>`         a typed parameter: `int` (optional '-', digits, fits a long), `uint`, `alpha`
 *                        (ASCII letters) or `alnum` (letters and digits), checked after decoding;
 *   - `*path`            a wildcard, last only: the rest of the path (possibly empty), percent-decoded.
 * At each segment a static child is tried first, then the typed parameters (int, uint, alpha, alnum), then a
 * plain parameter, then a wildcard; a branch that fails further down is backtracked. A path that matches a
 * route for other methods only gets 405 with their Allow header; HEAD is answered by a GET route.
 *
 * Handlers come in two kinds, told apart by their type: a `@nogc nothrow` handler runs inline on the event
 * loop (the fast path: nothing may block); any other handler runs in a pooled fiber, may throw (→ 500) and
 * may wait for blocking work with `aurora.offload.offload`.
 */
module aurora.router;

import std.traits : functionAttributes, FunctionAttribute, isFunctionPointer, isDelegate;

import aurora.middleware : Middleware;
import aurora.parser : Request, Method, methodNames, moved;
import aurora.response : Response;

enum maxParams = 8;

/// Bytes of percent-decoded parameter values one request may hold (in the worker's Params: no allocation).
enum paramBytes = 1024;

/// What a parameter segment accepts.
enum ParamKind : ubyte { int_, uint_, alpha, alnum, text, rest }

private immutable string[ParamKind.rest] kindNames = ["int", "uint", "alpha", "alnum", "text"];

/// Path parameters of a matched route.
struct Params
{
@nogc nothrow:
    const(char)[][maxParams] names;
    const(char)[][maxParams] values;   /// percent-decoded
    long[maxParams] numbers;           /// the value of an `int`/`uint` parameter
    size_t count;
    private char[paramBytes] decoded;  // the values that needed decoding
    private size_t used;

    /// The value of parameter `name`, or null.
    const(char)[] opIndex(const(char)[] name) const
    {
        foreach (i; 0 .. count)
            if (names[i] == name)
                return values[i];
        return null;
    }

    /// The number of an `int` or `uint` parameter (`fallback` when there is no such parameter).
    long integer(const(char)[] name, long fallback = 0) const
    {
        foreach (i; 0 .. count)
            if (names[i] == name)
                return numbers[i];
        return fallback;
    }

    /// A copy of `src` whose decoded values point into this struct's own room.
    void copyFrom(ref const Params src)
    {
        names = src.names;
        numbers = src.numbers;
        count = src.count;
        used = src.used;
        decoded[0 .. used] = src.decoded[0 .. used];
        foreach (i; 0 .. count)
        {
            const v = src.values[i];
            const inRoom = v.ptr >= src.decoded.ptr && v.ptr < src.decoded.ptr + src.decoded.length;
            values[i] = inRoom ? decoded[v.ptr - src.decoded.ptr .. v.ptr - src.decoded.ptr + v.length] : v;
        }
    }

    /// Point every value that lies in `[from, from + len)` to the same offset from `to` (the request bytes
    /// were moved there).
    void rebase(const(void)* from, size_t len, const(void)* to)
    {
        foreach (i; 0 .. count)
            values[i] = moved(values[i], from, len, to);
    }

    private void reset()
    {
        count = 0;
        used = 0;
    }

    private bool push(const(char)[] value, long number)
    {
        if (count == maxParams)
            return false;
        values[count] = value;
        numbers[count] = number;
        count++;
        return true;
    }

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
        decoded[used .. used + i] = part[0 .. i];
        used += i;
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
}

/// A handler run inline on the event loop: must not block, allocate on the GC heap or throw.
alias FastHandler = void delegate(ref const Request req, ref Response res, ref const Params params) @nogc nothrow;
/// A handler run in a pooled fiber: may throw (the client gets 500) and may `offload` blocking work.
alias Handler = void delegate(ref const Request req, ref Response res, ref const Params params);

struct Route
{
    Method method;
    string pattern;         /// the whole template, e.g. "/users/:id<int>" (the metrics label)
    string[] paramNames;    /// in path order
    FastHandler fast;       /// set for an inline handler
    Handler slow;           /// set for a fiber handler
    Middleware[] chain;     /// the route's own middleware (its groups'), after the router's
}

struct Match
{
    int route = -1;         /// index into Router.routes, -1 when none
    string allowHeader;     /// set when the path exists for other methods only (405)
}

private struct Node
{
    string segment;                   // static segments: the text; parameters: unused
    Node*[] statics;
    Node*[ParamKind.max + 1] params;  // by kind; `rest` is the wildcard
    int[Method.max + 1] routes = -1;  // route index by method
    string allowHeader;               // "Allow: GET, HEAD\r\n" when the node ends a route

    bool ends() const @nogc nothrow
    {
        foreach (r; routes)
            if (r >= 0)
                return true;
        return false;
    }
}

/// Thrown at start-up for a malformed or conflicting route.
class RouteError : Exception
{
    this(string msg) { super(msg); }
}

struct Router
{
    Route[] routes;
    /// "Allow: ...\r\n" with every method the server answers (the `OPTIONS *` response)
    string allowAll = "Allow: OPTIONS\r\n";
    /// Middleware of every request, routed or not (see aurora.middleware)
    Middleware[] middleware;
    bool routeMiddleware;   /// some route has middleware of its own
    private Node* root;

    /// Run `m` around every request from now on.
    void use(Middleware m) { middleware ~= m; }

    /// Register `handler` for `method` and the template `pattern` (which must start with '/').
    void add(H)(Method method, string pattern, H handler, Middleware[] chain = null)
        if (isFunctionPointer!H || isDelegate!H)
    {
        import std.functional : toDelegate;

        Route r;
        r.method = method;
        r.pattern = pattern;
        r.chain = chain;
        routeMiddleware = routeMiddleware || chain.length > 0;
        enum attrs = functionAttributes!H;
        static if ((attrs & FunctionAttribute.nogc) && (attrs & FunctionAttribute.nothrow_))
            r.fast = cast(FastHandler) toDelegate(handler);
        else
            r.slow = cast(Handler) toDelegate(handler);
        insert(r);
    }

    void get(H)(string pattern, H h) { add(Method.GET, pattern, h); }
    void post(H)(string pattern, H h) { add(Method.POST, pattern, h); }
    void put(H)(string pattern, H h) { add(Method.PUT, pattern, h); }
    void patch(H)(string pattern, H h) { add(Method.PATCH, pattern, h); }
    void del(H)(string pattern, H h) { add(Method.DELETE, pattern, h); }

    /// Routes registered through the group get `prefix` in front of their template.
    RouteGroup group(string prefix) return { return RouteGroup(&this, prefix); }

    /// The templates of the routes, in registration order (the metrics labels).
    string[] labels() const
    {
        string[] l;
        foreach (ref r; routes)
            l ~= r.pattern;
        return l;
    }

    private void insert(Route r)
    {
        if (r.pattern.length == 0 || r.pattern[0] != '/')
            throw new RouteError("route template must start with '/': " ~ r.pattern);
        if (root is null)
            root = new Node;
        auto n = root;
        auto segs = splitPath(r.pattern);
        foreach (i, seg; segs)
            n = child(n, seg, i + 1 == segs.length, r);
        if (n.routes[r.method] >= 0)
            throw new RouteError("route registered twice: " ~ methodNames[r.method] ~ " " ~ r.pattern);
        n.routes[r.method] = cast(int) routes.length;
        routes ~= r;
        n.allowHeader = allowLine(n.routes);
        int[Method.max + 1] all = -1;
        foreach (ref o; routes)
            all[o.method] = 0;
        all[Method.OPTIONS] = 0;
        allowAll = allowLine(all);
    }

    /// The child of `n` for the template segment `seg` (created when new); records parameter names in `r`.
    private Node* child(Node* n, string seg, bool last, ref Route r)
    {
        if (seg.length && (seg[0] == ':' || seg[0] == '*'))
        {
            const wildcard = seg[0] == '*';
            if (wildcard && !last)
                throw new RouteError("a wildcard must be the last segment: " ~ r.pattern);
            string name = seg[1 .. $];
            auto kind = wildcard ? ParamKind.rest : ParamKind.text;
            if (!wildcard)
                kind = parseKind(name, r.pattern);
            if (name.length == 0)
                throw new RouteError("parameter without a name: " ~ r.pattern);
            foreach (other; r.paramNames)
                if (other == name)
                    throw new RouteError("parameter name used twice: " ~ r.pattern);
            r.paramNames ~= name;
            if (n.params[kind] is null)
                n.params[kind] = new Node;
            return n.params[kind];
        }
        foreach (c; n.statics)
            if (c.segment == seg)
                return c;
        auto c = new Node;
        c.segment = seg;
        n.statics ~= c;
        return c;
    }

    /// Find the route for `method` and `path`; fills `params` (names included).
    Match match(Method method, const(char)[] path, ref Params params) const @nogc nothrow
    {
        Match m;
        params.reset();
        if (root is null || path.length == 0 || path[0] != '/')
            return m;
        if (!walk(root, path, 1, method, params, m))
        {
            params.reset();
            m.route = -1;
            return m;
        }
        foreach (i, name; routes[m.route].paramNames)
            params.names[i] = name;
        return m;
    }

    /// Match the segment of `path` that starts at `pos` against the children of `n`, and the rest below them.
    private static bool walk(const(Node)* n, const(char)[] path, size_t pos, Method method,
                             ref Params params, ref Match m) @nogc nothrow
    {
        size_t e = pos;
        while (e < path.length && path[e] != '/')
            e++;
        const seg = path[pos .. e];
        const last = e == path.length;

        foreach (c; n.statics)
            if (c.segment == seg && (last ? ends(c, method, m) : walk(c, path, e + 1, method, params, m)))
                return true;
        const mark = params.count, markUsed = params.used;
        foreach (kind; ParamKind.int_ .. ParamKind.rest)
        {
            const c = n.params[kind];
            if (c is null || seg.length == 0)
                continue;
            const value = params.decode(seg);
            long number;
            if (value !is null && accepts(kind, value, number) && params.push(value, number)
                    && (last ? ends(c, method, m) : walk(c, path, e + 1, method, params, m)))
                return true;
            params.count = mark;
            params.used = markUsed;
        }
        if (const c = n.params[ParamKind.rest])
        {
            const value = params.decode(path[pos .. $]);
            if (value !is null && params.push(value, 0) && ends(c, method, m))
                return true;
            params.count = mark;
            params.used = markUsed;
        }
        return false;
    }

    /// Whether `n` ends a route for `method`; remembers the Allow header of a route for other methods.
    private static bool ends(const(Node)* n, Method method, ref Match m) @nogc nothrow
    {
        int r = n.routes[method];
        if (r < 0 && method == Method.HEAD)
            r = n.routes[Method.GET];
        if (r >= 0)
        {
            m.route = r;
            return true;
        }
        if (m.allowHeader is null && n.ends())
            m.allowHeader = n.allowHeader;
        return false;
    }
}

/// A prefix for a set of routes: `auto api = router.group("/api"); api.get("/users/:id<int>", &user);`.
struct RouteGroup
{
    private Router* router;
    private string prefix;
    private Middleware[] chain;

    /// Run `m` around the routes registered through this group from now on.
    void use(Middleware m) { chain = chain ~ m; }

    void add(H)(Method method, string pattern, H h) { router.add(method, prefix ~ pattern, h, chain); }
    void get(H)(string pattern, H h) { add(Method.GET, pattern, h); }
    void post(H)(string pattern, H h) { add(Method.POST, pattern, h); }
    void put(H)(string pattern, H h) { add(Method.PUT, pattern, h); }
    void patch(H)(string pattern, H h) { add(Method.PATCH, pattern, h); }
    void del(H)(string pattern, H h) { add(Method.DELETE, pattern, h); }
    RouteGroup group(string sub) { return RouteGroup(router, prefix ~ sub, chain); }
}

/// "/a/:b/" → ["a", ":b", ""] (the leading '/' dropped).
private string[] splitPath(string pattern)
{
    string[] segs;
    size_t s = 1;
    foreach (i; 1 .. pattern.length + 1)
        if (i == pattern.length || pattern[i] == '/')
        {
            segs ~= pattern[s .. i];
            s = i + 1;
        }
    return segs;
}

/// The kind named in `name`'s "<type>" suffix (removed from `name`); text when there is none.
private ParamKind parseKind(ref string name, string pattern)
{
    import std.string : indexOf;

    const lt = name.indexOf('<');
    if (lt < 0)
        return ParamKind.text;
    if (name[$ - 1] != '>')
        throw new RouteError("malformed parameter type: " ~ pattern);
    const type = name[lt + 1 .. $ - 1];
    name = name[0 .. lt];
    foreach (k, n; kindNames)
        if (n == type)
            return cast(ParamKind) k;
    throw new RouteError("unknown parameter type <" ~ type ~ "> (int, uint, alpha, alnum): " ~ pattern);
}

/// Whether a decoded segment is of `kind`; the number of an int/uint.
private bool accepts(ParamKind kind, const(char)[] v, out long number) @nogc nothrow
{
    final switch (kind)
    {
    case ParamKind.int_:
        return parseLong(v, true, number);
    case ParamKind.uint_:
        return parseLong(v, false, number);
    case ParamKind.alpha:
        foreach (char c; v)
            if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
                return false;
        return true;
    case ParamKind.alnum:
        foreach (char c; v)
            if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9'))
                return false;
        return true;
    case ParamKind.text, ParamKind.rest:
        return true;
    }
}

/// Decimal digits (with an optional '-' when `signed`) that fit a long.
bool parseLong(const(char)[] v, bool signed, out long number) @nogc nothrow pure
{
    const neg = signed && v.length && v[0] == '-';
    const digits = v[neg .. $];
    if (digits.length == 0 || digits.length > 19)
        return false;
    ulong n = 0;
    foreach (char c; digits)
    {
        if (c < '0' || c > '9')
            return false;
        n = n * 10 + (c - '0');
    }
    if (n > (neg ? 1UL << 63 : long.max))
        return false;
    number = neg ? -cast(long)(n - 1) - 1 : cast(long) n;
    return true;
}

/// "Allow: GET, HEAD, POST\r\n" for the methods that have a route (HEAD with GET).
private string allowLine(const int[Method.max + 1] byMethod)
{
    string s = "Allow: ";
    bool first = true;
    foreach (m; [Method.GET, Method.HEAD, Method.POST, Method.PUT, Method.DELETE, Method.PATCH, Method.OPTIONS])
    {
        const has = byMethod[m] >= 0 || (m == Method.HEAD && byMethod[Method.GET] >= 0);
        if (!has)
            continue;
        s ~= (first ? "" : ", ") ~ methodNames[m];
        first = false;
    }
    return s ~ "\r\n";
}

private uint hexValue(char c) pure nothrow @nogc
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

version (unittest)
{
    private void h1(ref const Request, ref Response, ref const Params) @nogc nothrow {}
    private void h2(ref const Request, ref Response, ref const Params) @nogc nothrow {}
    private void slow(ref const Request, ref Response, ref const Params) {}
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
                    "/plain", "/plaintextX", "", "x"])
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
    assert(r.labels() == ["/plaintext", "/users/:id/posts/:post", "/users/:id", "/"]);
    assert(r.routes[0].fast !is null && r.routes[0].slow is null);
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

unittest
{   // typed parameters, priorities, backtracking, wildcards, groups
    Router r;
    r.get("/users/:id<int>", &h1);          // 0
    r.get("/users/me", &h1);                // 1
    r.get("/users/:name<alpha>", &h1);      // 2
    r.get("/users/:any", &h1);              // 3
    r.get("/users/:id<uint>/posts", &h2);   // 4
    r.get("/files/*path", &h2);             // 5
    r.get("/a/:x/c", &h1);                  // 6
    r.get("/a/b/d", &h1);                   // 7
    auto api = r.group("/api");
    auto v1 = api.group("/v1");
    v1.post("/items/:sku<alnum>", &slow);   // 8
    Params p;

    assert(r.match(Method.GET, "/users/me", p).route == 1);
    assert(r.match(Method.GET, "/users/-42", p).route == 0 && p.integer("id") == -42 && p["id"] == "-42");
    assert(r.match(Method.GET, "/users/9223372036854775807", p).route == 0 && p.integer("id") == long.max);
    assert(r.match(Method.GET, "/users/-9223372036854775808", p).route == 0 && p.integer("id") == long.min);
    assert(r.match(Method.GET, "/users/9223372036854775808", p).route == 3); // overflows int: a plain segment
    assert(r.match(Method.GET, "/users/%31%32", p).route == 0 && p.integer("id") == 12);
    assert(r.match(Method.GET, "/users/bob", p).route == 2 && p["name"] == "bob" && p["id"] is null);
    assert(r.match(Method.GET, "/users/bob1", p).route == 3 && p["any"] == "bob1");
    assert(r.match(Method.GET, "/users/7/posts", p).route == 4 && p.integer("id") == 7);
    assert(r.match(Method.GET, "/users/-7/posts", p).route == -1);
    assert(r.match(Method.GET, "/files/", p).route == 5 && p["path"] == "");
    assert(r.match(Method.GET, "/files/css/site%20a.css", p).route == 5 && p["path"] == "css/site a.css");
    assert(r.match(Method.GET, "/files", p).route == -1);
    // /a/b/c: the static "b" leads nowhere (only /a/b/d), the parameter takes it
    assert(r.match(Method.GET, "/a/b/c", p).route == 6 && p["x"] == "b" && p.count == 1);
    assert(r.match(Method.GET, "/a/b/d", p).route == 7 && p.count == 0);
    assert(r.match(Method.POST, "/api/v1/items/X12", p).route == 8 && p["sku"] == "X12");
    assert(r.routes[8].slow !is null && r.routes[8].fast is null);
    auto m = r.match(Method.GET, "/api/v1/items/X12", p);
    assert(m.route == -1 && m.allowHeader == "Allow: POST\r\n");
    assert(r.match(Method.POST, "/api/v1/items/a-b", p).route == -1);

    // Params copies keep their own decoded values
    r.match(Method.GET, "/files/a%20b", p);
    Params q;
    q.copyFrom(p);
    p.reset();
    p.decode("%41%41%41%41%41%41%41%41%41");
    assert(q["path"] == "a b");
}

unittest
{   // malformed and conflicting templates are refused at start-up
    import std.exception : assertThrown;

    Router r;
    r.get("/x/:id", &h1);
    assertThrown!RouteError(r.get("/x/:id", &h2));
    assertThrown!RouteError(r.get("nope", &h1));
    assertThrown!RouteError(r.get("/a/*rest/b", &h1));
    assertThrown!RouteError(r.get("/a/:", &h1));
    assertThrown!RouteError(r.get("/a/:n<float>", &h1));
    assertThrown!RouteError(r.get("/a/:n<int", &h1));
    assertThrown!RouteError(r.get("/a/:n/:n", &h1));
    r.get("/x/:other/y", &h1); // another name at the same place is fine
}

unittest
{
    long n;
    assert(parseLong("0", false, n) && n == 0);
    assert(!parseLong("-1", false, n) && !parseLong("", true, n) && !parseLong("-", true, n));
    assert(!parseLong("1a", true, n) && !parseLong("99999999999999999999", true, n));
    assert(parseLong("-0", true, n) && n == 0);
}

/**
 * libFuzzer target for the router and the response builder (the first input byte picks which).
 *
 * Router: a fixed set of routes (static, typed, plain and wildcard segments) is matched against the input as a
 * path, for every method. A match must be repeatable, name exactly its route's parameters, give values that
 * are slices of the path or of the Params' own room, and `int`/`uint` values whose text is their number.
 *
 * Response builder: the input is a program of builder calls (header, setCookie, send, begin, put, finish,
 * beginChunked, flush, discard) with fuzzed names, values and bodies. Whatever the calls, the bytes that end
 * up in the buffer (after the server's own fallback to one clean 500) must be one well-formed response:
 * a status line, header lines that are `token: value` with no CR, LF or NUL inside, and a body framed exactly
 * by its Content-Length or its chunks.
 *
 * Build and run: see BUILD.bazel (`framework_fuzz`) and tests/test_fuzz_framework.py.
 */
module framework_fuzz;

import aurora.parser : Method, Request;
import aurora.response;
import aurora.router;

extern (C) int LLVMFuzzerTestOneInput(const(ubyte)* data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzzRouter(cast(const(char)[]) data[1 .. size]);
    else
        fuzzResponse(data[1 .. size]);
    return 0;
}

// ------------------------------------------------------------------ router

private void h(ref const Request, ref Response, ref const Params) @nogc nothrow {}

private __gshared Router* router;

private Router* theRouter()
{
    if (router is null)
    {
        router = new Router;
        foreach (p; ["/", "/plaintext", "/users/:id<int>", "/users/me", "/users/:name<alpha>", "/users/:any",
                     "/users/:id<uint>/posts/:post", "/files/*path", "/a/:x/c", "/a/b/d", "/k/:v<alnum>/:w",
                     "/api/v1/items/:sku", "/api/v1/items/:sku/parts/*rest", "/%41/:p"])
            router.get(p, &h);
        router.post("/users/:id<int>", &h);
    }
    return router;
}

private bool inside(const(char)[] s, const(char)[] outer)
{
    return s.ptr >= outer.ptr && s.ptr + s.length <= outer.ptr + outer.length;
}

private void fuzzRouter(const(char)[] path)
{
    auto r = theRouter();
    foreach (m; [Method.GET, Method.HEAD, Method.POST, Method.DELETE])
    {
        Params p, q;
        const a = r.match(m, path, p);
        const b = r.match(m, path, q);
        assert(a.route == b.route && a.allowHeader == b.allowHeader && p.count == q.count);
        if (a.route < 0)
        {
            assert(p.count == 0);
            continue;
        }
        assert(a.allowHeader is null);
        const route = &r.routes[a.route];
        assert(p.count == route.paramNames.length);
        foreach (i; 0 .. p.count)
        {
            assert(p.names[i] == route.paramNames[i]);
            const v = p.values[i];
            assert(inside(v, path) || inside(v, cast(const(char)[]) (cast(const(ubyte)*)&p)[0 .. Params.sizeof]));
            long n;
            if (parseLong(v, true, n))
                assert(p.numbers[i] == n || p.numbers[i] == 0);
        }
    }
}

// ------------------------------------------------------------------ response builder

private struct Input
{
    const(ubyte)[] d;

    ubyte next() { if (!d.length) return 0; const b = d[0]; d = d[1 .. $]; return b; }

    const(char)[] bytes()
    {
        const n = next() % 24;
        const k = n < d.length ? n : d.length;
        auto s = cast(const(char)[]) d[0 .. k];
        d = d[k .. $];
        return s;
    }
}

private void fuzzResponse(const(ubyte)[] data)
{
    Buffer b;
    scope (exit) b.release();
    HeaderBag bag;
    auto in_ = Input(data);
    const mode = in_.next();
    auto res = Response(&b, (mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0);
    res.bag = &bag;
    static immutable ushort[8] codes = [200, 201, 204, 304, 404, 500, 206, 99];
    foreach (step; 0 .. 16)
    {
        if (!in_.d.length)
            break;
        final switch (in_.next() % 10)
        {
        case 0: res.header(in_.bytes(), in_.bytes()); break;
        case 1: res.setCookie(in_.bytes(), in_.bytes()); break;
        case 2: res.send(codes[in_.next() % 8], in_.bytes(), in_.bytes()); break;
        case 3: res.begin(codes[in_.next() % 8], in_.bytes(), in_.bytes()); break;
        case 4: res.put(in_.bytes()); break;
        case 5: res.finish(); break;
        case 6: res.beginChunked(codes[in_.next() % 8], in_.bytes()); break;
        case 7: res.flush(); break;
        case 8: res.discard(); break;
        case 9: res.putJsonString(in_.bytes()); break;
        }
    }
    if (!res.complete)
    {   // what the server does with an unfinished or misused response
        res.discard();
        res.send(500, "text/plain", "handler error\n");
    }
    assert(res.complete);
    checkResponse(cast(const(char)[]) b.data, res.headOnly);
}

/// One well-formed HTTP/1.1 response, nothing before or after it.
private void checkResponse(const(char)[] s, bool headOnly)
{
    import aurora.parser : ieq;

    assert(s.length > 13 && s[0 .. 9] == "HTTP/1.1 ");
    size_t pos = 0;
    const(char)[] line()
    {
        size_t e = pos;
        while (e + 1 < s.length && !(s[e] == '\r' && s[e + 1] == '\n'))
        {
            assert(s[e] != '\r' && s[e] != '\n' && s[e] != 0, "a bare CR, LF or NUL in the head");
            e++;
        }
        assert(e + 1 < s.length, "the head does not end");
        auto l = s[pos .. e];
        pos = e + 2;
        return l;
    }

    line(); // the status line
    long length = -1;
    bool chunked, closes;
    for (;;)
    {
        const l = line();
        if (l.length == 0)
            break;
        size_t colon = 0;
        while (colon < l.length && l[colon] != ':')
            colon++;
        assert(colon > 0 && colon < l.length && validFieldName(l[0 .. colon]), "not a header line");
        const v = l[colon + 1 .. $];
        if (ieq(l[0 .. colon], "content-length"))
        {
            assert(length < 0, "two Content-Length");
            long n;
            assert(parseLong(v[v.length && v[0] == ' ' ? 1 : 0 .. $], false, n));
            length = n;
        }
        if (ieq(l[0 .. colon], "transfer-encoding"))
            chunked = true;
        if (ieq(l[0 .. colon], "connection") && v == " close")
            closes = true;
    }
    const body = s[pos .. $];
    if (headOnly)
        assert(body.length == 0, "a body after HEAD");
    else if (chunked)
        checkChunks(body);
    else if (length < 0)
        assert(closes, "a body of unknown length on a connection that stays open");
    else
        assert(length >= 0 && body.length == length, "the body does not match its Content-Length");
}

private void checkChunks(const(char)[] b)
{
    for (;;)
    {
        size_t e = 0;
        ulong size = 0;
        while (e < b.length && b[e] != '\r')
        {
            const c = b[e] | 0x20;
            assert((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'), "a bad chunk size");
            size = size * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
            e++;
        }
        assert(e > 0 && e + 1 < b.length && b[e + 1] == '\n');
        b = b[e + 2 .. $];
        if (size == 0)
        {
            assert(b == "\r\n", "data after the last chunk");
            return;
        }
        assert(b.length >= size + 2 && b[size .. size + 2] == "\r\n", "a chunk not followed by CRLF");
        b = b[size + 2 .. $];
    }
}

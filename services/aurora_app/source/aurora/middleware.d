/**
 * Middleware: code around every handler, chained once at start-up and run without allocation.
 *
 * A `Middleware` has a `before` (run before the handler, in the order of `use`; returning true means it
 * answered the request itself, and the handler and the later middleware are skipped) and an `after` (run once
 * the response is complete, in reverse order, for every middleware whose `before` ran). `Router.use` adds one
 * for every request, routed or not (so CORS can answer a preflight to any path); `RouteGroup.use` for the
 * routes registered through that group afterwards.
 *
 *     router.use(requestId());
 *     router.use(cors(CorsOptions(["https://app.example"])));
 *     router.use(accessLog());
 *     auto api = router.group("/api");
 *     api.use(bodyLimit(16 * 1024));
 *
 * Middleware adds headers with `res.header(...)` before the handler writes its response.
 */
module aurora.middleware;

import core.atomic : atomicLoad, atomicStore, atomicOp, MemoryOrder;

import aurora.parser : Request, Method, ieq;
import aurora.response : Response;

/// Before the handler: true when it answered the request (the handler is then skipped).
alias Before = bool delegate(ref const Request req, ref Response res) @nogc nothrow;
/// After the response is complete: `nanos` since the request was dispatched.
alias After = void delegate(ref const Request req, ref const Response res, ulong nanos) @nogc nothrow;

struct Middleware
{
    Before before;
    After after;
}

// ------------------------------------------------------------------ request id

/// `X-Request-Id`: the client's own when it is 1-64 characters of `[A-Za-z0-9._-]`, else a new one
/// (`<8 hex digits of the worker>-<16 hex digits of a counter>`), set on the response.
Middleware requestId()
{
    static bool before(ref const Request req, ref Response res) @nogc nothrow
    {
        const given = req.header("x-request-id");
        if (given.length && given.length <= 64 && idChars(given))
        {
            res.header("X-Request-Id", given);
            return false;
        }
        char[25] id;
        newRequestId(id);
        res.header("X-Request-Id", id[]);
        return false;
    }

    Middleware m;
    m.before = toDelegate(&before);
    return m;
}

private bool idChars(const(char)[] s) @nogc nothrow pure
{
    foreach (char c; s)
        if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9') && c != '-' && c != '_' && c != '.')
            return false;
    return true;
}

private uint idPrefix;   // thread-local: this worker's random prefix (0 until the first id)
private ulong idCounter; // thread-local

extern (C) private uint arc4random() nothrow @nogc; // glibc >= 2.36

private void newRequestId(ref char[25] id) @nogc nothrow
{
    static immutable hex = "0123456789abcdef";
    while (idPrefix == 0)
        idPrefix = arc4random();
    const n = ++idCounter;
    foreach (i; 0 .. 8)
        id[i] = hex[(idPrefix >> (28 - 4 * i)) & 15];
    id[8] = '-';
    foreach (i; 0 .. 16)
        id[9 + i] = hex[(n >> (60 - 4 * i)) & 15];
}

// ------------------------------------------------------------------ CORS

struct CorsOptions
{
    const(string)[] origins;        /// allowed origins, exactly as browsers send them; "*" for any
    string methods = "GET, HEAD, POST, PUT, DELETE, PATCH";
    string headers = "Content-Type"; /// request headers a preflight may ask for
    string expose;                   /// response headers scripts may read (Access-Control-Expose-Headers)
    bool credentials;                /// Access-Control-Allow-Credentials (the origin is echoed, never "*")
    uint maxAge = 600;               /// seconds a preflight may be cached
}

/**
 * CORS (the Fetch standard): a request without `Origin` passes untouched; from an allowed origin it gets
 * `Access-Control-Allow-Origin` (and `Vary: Origin` unless any origin is allowed without credentials); a
 * preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here with 204 and the allowed
 * methods, headers and max-age, or 403 from an origin that is not allowed.
 */
Middleware cors(CorsOptions o)
{
    import std.conv : to;

    auto state = new CorsState;
    state.o = o;
    state.maxAge = o.maxAge.to!string;
    foreach (origin; o.origins)
        state.any = state.any || origin == "*";
    Middleware m;
    m.before = &state.before;
    return m;
}

private final class CorsState
{
    CorsOptions o;
    string maxAge;
    bool any;

    bool allowed(const(char)[] origin) const @nogc nothrow
    {
        if (any)
            return true;
        foreach (a; o.origins)
            if (a == origin)
                return true;
        return false;
    }

    bool before(ref const Request req, ref Response res) @nogc nothrow
    {
        const origin = req.header("origin");
        if (origin is null)
            return false;
        const preflight = req.method == Method.OPTIONS && req.header("access-control-request-method") !is null;
        if (!allowed(origin))
        {
            if (preflight)
                res.send(403, "text/plain", "origin not allowed\n");
            return preflight;
        }
        const echo = o.credentials || !any;
        res.header("Access-Control-Allow-Origin", echo ? origin : "*");
        if (echo)
            res.header("Vary", "Origin");
        if (o.credentials)
            res.header("Access-Control-Allow-Credentials", "true");
        if (!preflight)
        {
            if (o.expose.length)
                res.header("Access-Control-Expose-Headers", o.expose);
            return false;
        }
        res.header("Access-Control-Allow-Methods", o.methods);
        if (o.headers.length)
            res.header("Access-Control-Allow-Headers", o.headers);
        res.header("Access-Control-Max-Age", maxAge);
        res.send(204, null, null);
        return true;
    }
}

// ------------------------------------------------------------------ body limit

/// 413 for a request body over `maxBytes` (a per-route limit below the server's `--max-body`).
Middleware bodyLimit(size_t maxBytes)
{
    static struct Check
    {
        size_t max;
        bool before(ref const Request req, ref Response res) @nogc nothrow
        {
            if (req.body.length <= max)
                return false;
            res.send(413, "text/plain", "request body too large\n");
            return true;
        }
    }

    auto c = new Check(maxBytes);
    Middleware m;
    m.before = &c.before;
    return m;
}

// ------------------------------------------------------------------ access log

/**
 * One line per request: `<date> "<method> <target> HTTP/1.<n>" <status> <response bytes> <seconds>
 * <request id or ->`, e.g. `Sat, 28 Nov 2026 04:30:00 GMT "GET /users/7 HTTP/1.1" 200 187 0.000021 -`.
 *
 * Never blocks the event loop: each worker appends to a ring buffer of its own, and a logger thread writes
 * the rings to `fd` at least 10 times a second. When a ring is full (the output cannot keep up), lines are
 * dropped and counted (`droppedAccessLogLines`).
 */
Middleware accessLog(int fd = 2)
{
    startLogger(fd);
    static void after(ref const Request req, ref const Response res, ulong nanos) @nogc nothrow
    {
        logLine(req, res, nanos);
    }

    Middleware m;
    m.after = toDelegate(&after);
    return m;
}

/// Lines dropped because a worker's ring was full.
ulong droppedAccessLogLines() @nogc nothrow { return atomicLoad(dropped); }

private enum size_t ringSize = 1 << 18; // 256 KiB per worker

/// One worker's lines: it writes at `head`, the logger reads from `tail` (single producer, single consumer).
private struct Ring
{
    char[ringSize] data = void;
    shared size_t head; // bytes ever written (the producer's)
    shared size_t tail; // bytes ever taken (the consumer's)
    Ring* next;
}

private __gshared Ring* rings;        // every worker's ring (appended once per thread, under ringsLock)
private __gshared int logFd = -1;
private shared ulong dropped;
private shared bool loggerStarted;
private Ring* myRing;                 // thread-local

private void logLine(ref const Request req, ref const Response res, ulong nanos) @nogc nothrow
{
    import aurora.date : dateLine;
    import aurora.response : formatUint;

    auto r = myRing is null ? (myRing = registerRing()) : myRing;
    if (r is null)
        return;
    char[1024] line = void;
    size_t n = 0;
    void add(const(char)[] s)
    {
        const k = s.length < line.length - n ? s.length : line.length - n;
        line[n .. n + k] = s[0 .. k];
        n += k;
    }

    char[20] t;
    const date = dateLine(); // "Date: <IMF-fixdate>\r\n"
    add(date[6 .. $ - 2]);
    add(" \"");
    add(req.methodText);
    add(" ");
    add(req.target.length > 512 ? req.target[0 .. 512] : req.target);
    add(req.minorVersion ? " HTTP/1.1\" " : " HTTP/1.0\" ");
    add(formatUint(res.status, t));
    add(" ");
    add(formatUint(res.bytesWritten, t));
    add(" ");
    add(formatUint(nanos / 1_000_000_000, t));
    add(".");
    const frac = formatUint(nanos / 1000 % 1_000_000 + 1_000_000, t); // 6 digits, leading zeros kept
    add(frac[1 .. $]);
    add(" ");
    const rid = res.headerValue("X-Request-Id");
    add(rid.length ? rid : "-");
    if (n == line.length)
        n--;
    line[n++] = '\n';
    push(r, line[0 .. n]);
}

private void push(Ring* r, const(char)[] s) @nogc nothrow
{
    const head = atomicLoad!(MemoryOrder.raw)(r.head);
    const tail = atomicLoad!(MemoryOrder.acq)(r.tail);
    if (head - tail + s.length > ringSize)
    {
        atomicOp!"+="(dropped, 1);
        return;
    }
    foreach (i, char c; s)
        r.data[(head + i) & (ringSize - 1)] = c;
    atomicStore!(MemoryOrder.rel)(r.head, head + s.length);
}

private Ring* registerRing() @nogc nothrow
{
    import core.stdc.stdlib : calloc;
    import core.sys.posix.pthread;

    __gshared pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    auto r = cast(Ring*) calloc(1, Ring.sizeof); // once per worker, at its first logged request
    if (r is null)
        return null;
    pthread_mutex_lock(&lock);
    r.next = rings;
    rings = r;
    pthread_mutex_unlock(&lock);
    return r;
}

private void startLogger(int fd)
{
    import core.thread : Thread;

    logFd = fd;
    if (atomicLoad(loggerStarted))
        return;
    atomicStore(loggerStarted, true);
    auto t = new Thread(&loggerLoop);
    t.isDaemon = true;
    t.start();
}

private void loggerLoop()
{
    import core.thread : Thread;
    import core.time : msecs;

    for (;;)
    {
        Thread.sleep(msecs(100));
        drainRings();
    }
}

/// Write out what every ring holds (the logger thread; also at the end of a test).
void drainRings() nothrow @nogc
{
    import core.sys.posix.unistd : write;

    for (auto ring = cast(Ring*) atomicLoad(*cast(shared(size_t)*) &rings); ring !is null; ring = ring.next)
    {
        const tail = atomicLoad!(MemoryOrder.raw)(ring.tail);
        const head = atomicLoad!(MemoryOrder.acq)(ring.head);
        size_t at = tail;
        while (at < head)
        {
            const off = at & (ringSize - 1);
            const run = head - at < ringSize - off ? head - at : ringSize - off;
            const w = write(logFd, ring.data.ptr + off, run);
            if (w <= 0)
                break; // the output failed: these lines are lost, the next ones are tried again
            at += w;
        }
        atomicStore!(MemoryOrder.rel)(ring.tail, head);
    }
}

private auto toDelegate(F)(F fp)
{
    import std.functional : toDelegate_ = toDelegate;

    return toDelegate_(fp);
}

unittest
{
    char[25] a, b;
    newRequestId(a);
    newRequestId(b);
    assert(a[0 .. 9] == b[0 .. 9] && a[8] == '-' && a[9 .. $] == "0000000000000001" && b[9 .. $] == "0000000000000002");
    assert(idChars("abc-DEF_1.2") && !idChars("a b") && !idChars("a\"b"));
}

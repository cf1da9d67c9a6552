/**
 * aurora_app: the endpoints and the command line around the aurora server.
 *
 *   aurora_app [--host 127.0.0.1] [--port 8083] [--workers N] [--no-metrics] [...]
 *
 * One user of `aurora.serve`: it prints "listening on HOST:PORT" once the sockets are bound (with --port 0 the
 * port is the one the OS chose); SIGTERM or SIGINT: stop accepting, finish the requests in flight, exit 0.
 */
module app;

import std.getopt;
import std.stdio : stderr;

import aurora.json : putJson, readJson;
import aurora.middleware;
import aurora.metrics : renderMetrics;
import aurora.offload : offload;
import aurora.parser : Method, Request;
import aurora.query : queryValue;
import aurora.response : CookieOptions, Response;
import aurora.router;
import aurora.serve : serve;
import aurora.server : ServerConfig, publishGcCounter;
import perfkit_metrics.exposition : contentType, negotiate;

// ------------------------------------------------------------------ handlers
@nogc nothrow
{
    enum plainBody = "Hello, World!";

    void plaintext(ref const Request, ref Response res, ref const Params)
    {
        res.send(200, "text/plain", plainBody);
    }

    void json(ref const Request, ref Response res, ref const Params)
    {
        // serialized per request, straight into the connection's buffer
        res.begin(200, "application/json");
        res.put(`{"message":`);
        res.putJsonString("Hello, World!");
        res.putChar('}');
        res.finish();
    }

    enum largeCount = 1000;

    void jsonLarge(ref const Request, ref Response res, ref const Params)
    {
        res.begin(200, "application/json");
        res.putChar('[');
        foreach (i; 0 .. largeCount)
        {
            if (i)
                res.putChar(',');
            res.put(`{"id":`);
            res.putUint(i + 1);
            res.put(`,"name":"item-`);
            res.putUint(i + 1);
            res.put(`","active":`);
            res.put(i % 2 ? "false" : "true");
            res.put(`,"score":`);
            res.putInt(cast(long)(i * 37 % 1000) - 500);
            res.putChar('}');
        }
        res.putChar(']');
        res.finish();
    }

    void metricsEndpoint(ref const Request req, ref Response res, ref const Params)
    {
        // OpenMetrics when the scraper asks for it (Prometheus does), else the text format 0.0.4
        const format = negotiate(req.header("accept"));
        publishGcCounter();
        res.begin(200, contentType(format));
        renderMetrics(res, format);
        res.finish();
    }

    void healthz(ref const Request, ref Response res, ref const Params)
    {
        res.send(200, "text/plain", "ok\n");
    }

    void hello(ref const Request, ref Response res, ref const Params p)
    {
        res.begin(200, "text/plain");
        res.put("Hello, ");
        res.put(p["name"]);
        res.put("!");
        res.finish();
    }

    void echo(ref const Request req, ref Response res, ref const Params)
    {
        res.send(200, "application/octet-stream", req.body);
    }

    /// A user as the typed-route workloads return it.
    struct User
    {
        long id;
        const(char)[] name;
        bool active;
        long[3] scores;
    }

    /// `/users/:id<int>`: the typed parameter as a number, the answer a struct written as JSON.
    void user(ref const Request, ref Response res, ref const Params p)
    {
        const id = p.integer("id");
        res.begin(200, "application/json");
        res.putJson(User(id, "user", id % 2 == 0, [id, id * 2, id * 3]));
        res.finish();
    }

    /// `/query?id=N&name=S`: query parameters, decoded; 400 without a numeric id.
    void query(ref const Request req, ref Response res, ref const Params)
    {
        char[64] idRoom, nameRoom;
        const idText = queryValue(req.query, "id", idRoom);
        long id;
        if (idText is null || !parseLong(idText, true, id))
        {
            res.send(400, "text/plain", "id must be an integer\n");
            return;
        }
        const name = queryValue(req.query, "name", nameRoom);
        res.begin(200, "application/json");
        res.putJson(User(id, name is null ? "anonymous" : name, true, [id, 0, 0]));
        res.finish();
    }
}

@nogc nothrow
{
    /// `POST /api/users`: a User read from the JSON body (no allocation) and written back; 400 with the
    /// error and its offset when the body is not one.
    void createUser(ref const Request req, ref Response res, ref const Params)
    {
        char[512] room;
        User u;
        const err = readJson(cast(const(char)[]) req.body, u, room);
        if (err)
        {
            res.begin(400, "application/json");
            res.put(`{"error":`);
            res.putJsonString(err.message);
            res.put(`,"offset":`);
            res.putUint(err.offset);
            res.putChar('}');
            res.finish();
            return;
        }
        res.begin(201, "application/json");
        res.putJson(u);
        res.finish();
    }

    /// `/api/visits`: a cookie read and set: the `visits` count of this client, one more each time.
    void visits(ref const Request req, ref Response res, ref const Params)
    {
        long n;
        const seen = req.cookie("visits");
        if (seen is null || !parseLong(seen, false, n) || n == long.max)
            n = 0;
        char[20] t;
        import aurora.response : formatUint;

        CookieOptions o;
        o.path = "/api";
        o.maxAge = 86_400;
        o.httpOnly = true;
        o.sameSite = "Lax";
        res.setCookie("visits", formatUint(n + 1, t), o);
        res.begin(200, "application/json");
        res.put(`{"visits":`);
        res.putUint(n + 1);
        res.putChar('}');
        res.finish();
    }
}

/// `/offload?ms=N` (default 1, at most 1000): N ms of blocking work (a sleep, as a file or database call
/// would block) run on the offload pool; the worker serves other connections meanwhile.
void blockingWork(ref const Request req, ref Response res, ref const Params)
{
    import core.thread : Thread;
    import core.time : msecs;

    char[16] room;
    const text = queryValue(req.query, "ms", room);
    long ms = 1;
    if (text !is null && (!parseLong(text, false, ms) || ms > 1000))
    {
        res.send(400, "text/plain", "ms must be an integer from 0 to 1000\n");
        return;
    }
    const slept = offload(() { Thread.sleep(msecs(ms)); return ms; });
    res.begin(200, "application/json");
    res.put(`{"slept_ms":`);
    res.putInt(slept);
    res.putChar('}');
    res.finish();
}

/// `/stream?n=N&size=S&ms=M`: a chunked body of N lines (default 5, at most 10^6) of S bytes (default 16, at
/// most 65536), each flushed to the client as it is made, M ms of offloaded waiting before each (default 0).
/// The writes follow the client: a flush waits until the socket has taken the data.
void stream(ref const Request req, ref Response res, ref const Params)
{
    import core.thread : Thread;
    import core.time : msecs;

    static long arg(ref const Request req, string name, long fallback, long max)
    {
        char[24] room;
        const text = queryValue(req.query, name, room);
        long v = fallback;
        return text is null ? fallback : parseLong(text, false, v) && v <= max ? v : -1;
    }

    const n = arg(req, "n", 5, 1_000_000), size = arg(req, "size", 16, 65_536), ms = arg(req, "ms", 0, 1000);
    if (n < 0 || size < 0 || ms < 0)
    {
        res.send(400, "text/plain", "n (<= 1000000), size (<= 65536) and ms (<= 1000) are integers\n");
        return;
    }
    static immutable char[1024] fill = 'x';
    res.beginChunked(200, "text/plain");
    foreach (i; 0 .. n)
    {
        if (ms)
            offload(() { Thread.sleep(msecs(ms)); });
        res.put("line ");
        res.putUint(i);
        res.putChar(' ');
        for (long left = size; left > 0; left -= fill.length)
            res.put(fill[0 .. left < fill.length ? cast(size_t) left : fill.length]);
        res.putChar('\n');
        if (!res.flush())
            return; // the client is gone
    }
    res.finish();
}

/// `/fail`: a fiber handler that throws (the client gets 500, the log a line).
void fail(ref const Request, ref Response, ref const Params)
{
    throw new Exception("this handler always fails");
}

/// What the command line turns on around the routes.
struct AppOptions
{
    bool accessLog;
    string[] corsOrigins;
    string staticDir;
}

Router* buildRouter(AppOptions opts = AppOptions.init)
{
    auto r = new Router;
    if (opts.corsOrigins.length)
        r.use(cors(CorsOptions(opts.corsOrigins, "GET, HEAD, POST", "Content-Type", "X-Request-Id")));
    if (opts.accessLog)
        r.use(accessLog());
    r.get("/plaintext", &plaintext);
    r.get("/json", &json);
    r.get("/json-large", &jsonLarge);
    r.get("/metrics", &metricsEndpoint);
    r.get("/healthz", &healthz);
    r.get("/hello/:name", &hello);
    r.post("/echo", &echo);
    r.get("/users/:id<int>", &user);
    r.get("/query", &query);
    r.get("/offload", &blockingWork);
    r.get("/fail", &fail);
    r.get("/stream", &stream);
    if (opts.staticDir.length)
    {
        import aurora.files : staticFiles;

        r.get("/static/*path", staticFiles(opts.staticDir));
    }
    // /api: a request id on every answer, bodies up to 64 KiB
    auto api = r.group("/api");
    api.use(requestId());
    api.use(bodyLimit(64 * 1024));
    api.post("/echo", &echo);
    api.get("/visits", &visits);
    api.post("/users", &createUser);
    return r;
}

int main(string[] args)
{
    ServerConfig cfg;
    AppOptions app;
    auto limits = &cfg.limits;
    bool noMetrics;
    try
    {
        auto help = getopt(args,
            "host", "address to bind (IPv4 or IPv6, default 127.0.0.1)", &cfg.host,
            "port", "port (default 8083; 0 = ephemeral, the bound port is printed)", &cfg.port,
            "workers", "worker threads (default: one per usable CPU)", &cfg.workers,
            "offload-threads", "threads for the blocking work of fiber handlers (default 16)", &cfg.offloadThreads,
            "header-timeout-ms", "time allowed for a request's header section", &cfg.headerTimeoutMs,
            "request-timeout-ms", "time allowed for a whole request, header section and body (default 60000)",
                &cfg.requestTimeoutMs,
            "idle-timeout-ms", "keep-alive idle timeout", &cfg.idleTimeoutMs,
            "drain-timeout-ms", "graceful shutdown limit", &cfg.drainTimeoutMs,
            "max-connections", "open connections over all workers", &cfg.maxConnections,
            "max-body", "largest request body in bytes (413 above)", &limits.maxBody,
            "max-request-line", "longest request line in bytes (414 above)", &limits.maxRequestLine,
            "max-header-bytes", "largest header section in bytes, request line included (431 above)",
                &limits.maxHeaderBytes,
            "max-headers", "most header fields in a request, at most 128 (431 above)", &limits.maxHeaders,
            "max-chunk-line", "longest chunk-size line of a chunked body (400 above)", &limits.maxChunkLine,
            "static-dir", "serve the files under this folder at /static/ (ETag, Range, sendfile)", &app.staticDir,
            "access-log", "one line per request on stderr (written by a logger thread)", &app.accessLog,
            "cors-origin", "allow this origin (repeat for more; * for any): CORS on every route", &app.corsOrigins,
            "tls-cert", "serve HTTPS: the certificate chain (PEM, leaf first); needs --tls-key", &cfg.tlsCert,
            "tls-key", "the private key (PEM) of --tls-cert", &cfg.tlsKey,
            "server-name", "the Server header of every response (\"\" for none)", &cfg.serverName,
            "no-metrics", "record no request metrics (no timing, no hot-path samples; /metrics still serves"
                ~ " the connection and GC metrics): the 'off' side of measuring the recording overhead", &noMetrics);
        if (help.helpWanted)
        {
            defaultGetoptPrinter("aurora_app: HTTP/1.1 server (plaintext, JSON, metrics)", help.options);
            return 0;
        }
    }
    catch (Exception e)
    {
        stderr.writefln("aurora_app: %s (see --help)", e.msg);
        return 2;
    }
    if (args.length > 1)
    {
        stderr.writefln("aurora_app: unexpected argument %s (see --help)", args[1]);
        return 2;
    }
    cfg.metrics = !noMetrics;
    return serve(buildRouter(app), cfg);
}

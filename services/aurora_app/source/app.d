/**
 * aurora_app: the endpoints and the command line around the aurora server.
 *
 *   aurora_app [--host 127.0.0.1] [--port 8083] [--workers N] [--no-metrics] [...]
 *
 * Prints "listening on HOST:PORT" once the sockets are bound (with --port 0 the
 * port is the one the OS chose). SIGTERM or SIGINT: stop accepting, finish the
 * requests in flight, exit 0.
 */
module app;

import core.stdc.stdlib : exit;
import core.sys.posix.signal;
import core.thread : Thread;
import std.getopt;
import std.stdio : stderr, stdout, writefln;

import aurora.metrics;
import perfkit_metrics.exposition : contentType, negotiate;
import aurora.parser : Method, Request;
import aurora.response : Response;
import aurora.router;
import aurora.server;

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
}

Router buildRouter()
{
    Router r;
    r.add(Method.GET, "/plaintext", &plaintext);
    r.add(Method.GET, "/json", &json);
    r.add(Method.GET, "/json-large", &jsonLarge);
    r.add(Method.GET, "/metrics", &metricsEndpoint);
    r.add(Method.GET, "/healthz", &healthz);
    r.add(Method.GET, "/hello/:name", &hello);
    r.add(Method.POST, "/echo", &echo);
    return r;
}

// ------------------------------------------------------------------ main
uint usableCpus()
{
    import core.sys.linux.sched : cpu_set_t, sched_getaffinity, CPU_COUNT;
    cpu_set_t set;
    if (sched_getaffinity(0, set.sizeof, &set) == 0)
    {
        const n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    return 1;
}

int main(string[] args)
{
    ServerConfig cfg;
    uint maxBody = cast(uint) cfg.limits.maxBody;
    bool noMetrics;
    try
    {
        auto help = getopt(args,
            "host", "address to bind (IPv4 or IPv6, default 127.0.0.1)", &cfg.host,
            "port", "port (default 8083; 0 = ephemeral, the bound port is printed)", &cfg.port,
            "workers", "worker threads (default: one per usable CPU)", &cfg.workers,
            "header-timeout-ms", "time allowed for a request's header section", &cfg.headerTimeoutMs,
            "request-timeout-ms", "time allowed for a whole request, header section and body (default 60000)",
                &cfg.requestTimeoutMs,
            "idle-timeout-ms", "keep-alive idle timeout", &cfg.idleTimeoutMs,
            "drain-timeout-ms", "graceful shutdown limit", &cfg.drainTimeoutMs,
            "max-connections", "open connections over all workers", &cfg.maxConnections,
            "max-body", "largest request body in bytes", &maxBody,
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
    if (cfg.headerTimeoutMs == 0 || cfg.requestTimeoutMs == 0 || cfg.idleTimeoutMs == 0 || cfg.maxConnections == 0)
    {
        stderr.writefln("aurora_app: timeouts and --max-connections must be positive");
        return 2;
    }
    cfg.limits.maxBody = maxBody;
    cfg.metrics = !noMetrics;
    if (cfg.workers == 0)
        cfg.workers = usableCpus();
    if (cfg.workers > 256)
    {
        stderr.writefln("aurora_app: --workers must be at most 256");
        return 2;
    }

    // room for --max-connections descriptors (as far as the hard limit allows)
    {
        import core.sys.posix.sys.resource : rlimit, getrlimit, setrlimit, RLIMIT_NOFILE;
        rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        {
            const want = cast(ulong) cfg.maxConnections + 64 + 8 * cfg.workers;
            if (rl.rlim_cur < want)
            {
                rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
            }
        }
    }

    // SIGTERM/SIGINT are taken by sigwait in this thread; workers inherit the mask
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, null);
    signal(SIGPIPE, SIG_IGN);

    auto router = new Router;
    *router = buildRouter();
    string[] labels;
    foreach (ref r; router.routes)
        labels ~= r.pattern;
    initMetrics(labels, cfg.workers);

    if (cfg.port != 0 && portTaken(cfg.host, cfg.port))
    {
        stderr.writefln("aurora_app: %s:%s: address already in use", cfg.host, cfg.port);
        return 1;
    }
    auto workers = new Worker*[cfg.workers];
    ushort port = cfg.port;
    foreach (i; 0 .. cfg.workers)
    {
        string err;
        ushort bound;
        const fd = openListener(cfg.host, port, cfg.backlog, bound, err);
        if (fd < 0)
        {
            stderr.writefln("aurora_app: %s:%s: %s", cfg.host, port, err);
            return 1;
        }
        port = bound; // the other workers join the same (possibly ephemeral) port
        auto w = new Worker;
        w.id = cast(int) i;
        w.cfg = &cfg;
        w.router = router;
        w.metrics = workerMetrics[i];
        if (!w.setup(fd))
        {
            stderr.writefln("aurora_app: epoll setup failed");
            return 1;
        }
        workers[i] = w;
    }

    Thread[] threads;
    foreach (w; workers)
    {
        auto t = new Thread(&w.run);
        t.isDaemon = false;
        t.start();
        threads ~= t;
    }
    import std.algorithm.searching : canFind;

    // an IPv6 address in brackets, as in a URL: "listening on [::1]:8083"
    const shown = cfg.host.canFind(':') && cfg.host[0] != '[' ? "[" ~ cfg.host ~ "]" : cfg.host;
    writefln("listening on %s:%s (%s worker%s)", shown, port, cfg.workers,
             cfg.workers == 1 ? "" : "s");
    stdout.flush();

    int sig;
    while (sigwait(&sigs, &sig) != 0) {}
    stderr.writefln("aurora_app: signal %s, draining connections", sig);
    foreach (w; workers)
        (cast(shared) w).wake();
    foreach (t; threads)
        t.join();
    stderr.writefln("aurora_app: stopped");
    return 0;
}

/**
 * `serve`: the library's entry point. It checks the configuration, raises the descriptor limit, opens one
 * SO_REUSEPORT listener per worker, starts the workers (and the offload pool), prints
 * "listening on HOST:PORT (N workers)" once the sockets are bound, and on SIGTERM or SIGINT stops accepting,
 * finishes the requests in flight and returns 0.
 *
 *     auto r = new Router;
 *     r.get("/plaintext", &plaintext);
 *     ServerConfig cfg;
 *     cfg.port = 8080;
 *     return serve(r, cfg);
 */
module aurora.serve;

import core.sys.posix.signal;
import core.thread : Thread;
import std.stdio : stderr, stdout, writefln;

import aurora.metrics : initMetrics, workerMetrics;
import aurora.middleware : drainRings;
import aurora.offload : startOffload, stopOffload;
import aurora.response : setServerName;
import aurora.router : Router;
import aurora.server;
import aurora.tls : TlsContext;

/// Serve `router` with `cfg` until SIGTERM or SIGINT. Returns the process exit code: 0 after a graceful stop,
/// 1 when the listeners cannot be opened, 2 for a configuration error (the message is on stderr).
int serve(Router* router, ServerConfig cfg)
{
    if (const err = configError(cfg))
    {
        stderr.writefln("%s: %s", cfg.serviceName, err);
        return 2;
    }
    if (cfg.workers == 0)
        cfg.workers = usableCpus();
    setServerName(cfg.serverName);
    raiseDescriptorLimit(cast(ulong) cfg.maxConnections + 64 + 8 * cfg.workers);

    // SIGTERM/SIGINT are taken by sigwait in this thread; the workers inherit the mask
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, null);
    signal(SIGPIPE, SIG_IGN);

    TlsContext tls;
    if (cfg.tlsCert.length)
    {
        string err;
        tls = TlsContext.load(cfg.tlsCert, cfg.tlsKey, err);
        if (tls is null)
        {
            stderr.writefln("%s: %s", cfg.serviceName, err);
            return 2;
        }
    }
    initMetrics(cfg.serviceName, router.labels(), cfg.workers);
    auto config = new ServerConfig;
    *config = cfg;
    auto workers = openWorkers(router, config, tls);
    if (workers is null)
        return 1;
    startOffload(cfg.offloadThreads);

    Thread[] threads;
    foreach (w; workers)
    {
        auto t = new Thread(&w.run);
        t.isDaemon = false;
        t.start();
        threads ~= t;
    }
    writefln("listening on %s:%s (%s worker%s%s)", shownHost(cfg.host), config.port, cfg.workers,
             cfg.workers == 1 ? "" : "s", tls is null ? "" : ", TLS");
    stdout.flush();

    int sig;
    while (sigwait(&sigs, &sig) != 0) {}
    stderr.writefln("%s: signal %s, draining connections", cfg.serviceName, sig);
    foreach (w; workers)
        (cast(shared) w).wake();
    foreach (t; threads)
        t.join();
    stopOffload();
    drainRings(); // the access log's last lines
    stderr.writefln("%s: stopped", cfg.serviceName);
    return 0;
}

/// What is wrong with `cfg`, or null.
string configError(const ref ServerConfig cfg)
{
    import aurora.response : validFieldValue;

    if (cfg.headerTimeoutMs == 0 || cfg.requestTimeoutMs == 0 || cfg.idleTimeoutMs == 0 || cfg.maxConnections == 0)
        return "timeouts and --max-connections must be positive";
    if (cfg.workers > 256)
        return "--workers must be at most 256";
    if (cfg.offloadThreads == 0 || cfg.offloadThreads > 1024)
        return "--offload-threads must be between 1 and 1024";
    if ((cfg.tlsCert.length == 0) != (cfg.tlsKey.length == 0))
        return "TLS needs both a certificate (--tls-cert) and its key (--tls-key)";
    if (!validFieldValue(cfg.serverName))
        return "the server name must be a valid header value";
    if (const err = cfg.limits.error())
        return err;
    return null;
}

/// Bind one listener per worker on cfg.host:cfg.port (an ephemeral port is shared by all) and set each worker up;
/// on success cfg.port is the bound port. Null (after a message on stderr) when that fails.
private Worker*[] openWorkers(Router* router, ServerConfig* cfg, TlsContext tls)
{
    if (cfg.port != 0 && portTaken(cfg.host, cfg.port))
    {
        stderr.writefln("%s: %s:%s: address already in use", cfg.serviceName, cfg.host, cfg.port);
        return null;
    }
    auto workers = new Worker*[cfg.workers];
    foreach (i; 0 .. cfg.workers)
    {
        string err;
        ushort bound;
        const fd = openListener(cfg.host, cfg.port, cfg.backlog, bound, err);
        if (fd < 0)
        {
            stderr.writefln("%s: %s:%s: %s", cfg.serviceName, cfg.host, cfg.port, err);
            return null;
        }
        cfg.port = bound; // the other workers join the same (possibly ephemeral) port
        auto w = new Worker;
        w.id = cast(int) i;
        w.cfg = cfg;
        w.router = router;
        w.metrics = workerMetrics[i];
        w.tls = tls;
        if (!w.setup(fd))
        {
            stderr.writefln("%s: epoll setup failed", cfg.serviceName);
            return null;
        }
        workers[i] = w;
    }
    return workers;
}

/// An IPv6 address in brackets, as in a URL: "[::1]".
private string shownHost(string host)
{
    import std.algorithm.searching : canFind;

    return host.canFind(':') && host[0] != '[' ? "[" ~ host ~ "]" : host;
}

/// CPUs this process may run on.
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

/// Room for `want` descriptors, as far as the hard limit allows.
private void raiseDescriptorLimit(ulong want)
{
    import core.sys.posix.sys.resource : rlimit, getrlimit, setrlimit, RLIMIT_NOFILE;

    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
    {
        rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

unittest
{
    ServerConfig cfg;
    assert(configError(cfg) is null);
    cfg.idleTimeoutMs = 0;
    assert(configError(cfg) == "timeouts and --max-connections must be positive");
    cfg = ServerConfig.init;
    cfg.tlsCert = "cert.pem";
    assert(configError(cfg) == "TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
    cfg = ServerConfig.init;
    cfg.serverName = "a\r\nb";
    assert(configError(cfg) == "the server name must be a valid header value");
    cfg = ServerConfig.init;
    cfg.limits.maxHeaders = 100_000;
    assert(configError(cfg) !is null);
    import aurora.response : defaultServerName, statusLine;

    assert(!setServerName("bad\r\nX-Injected: 1") && statusLine(200) == "HTTP/1.1 200 OK\r\nServer: aurora\r\n");
    assert(setServerName("svc/2.1") && statusLine(200) == "HTTP/1.1 200 OK\r\nServer: svc/2.1\r\n");
    assert(setServerName("") && statusLine(404) == "HTTP/1.1 404 Not Found\r\n");
    assert(setServerName(defaultServerName) && statusLine(200) == "HTTP/1.1 200 OK\r\nServer: aurora\r\n");
    assert(shownHost("::1") == "[::1]" && shownHost("[::1]") == "[::1]" && shownHost("127.0.0.1") == "127.0.0.1");
}

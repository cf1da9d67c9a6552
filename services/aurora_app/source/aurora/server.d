/**
 * The event loop: N worker threads, each with its own epoll instance and its
 * own SO_REUSEPORT listener, so a connection lives and dies on one thread and
 * the request path shares nothing.
 *
 * Per readable event a worker reads what the socket holds, parses every
 * complete request in the buffer (pipelining), appends each response to the
 * connection's write buffer in order, and sends the batch with one write.
 * Sockets are non-blocking and registered once, edge-triggered, for both
 * directions; with no traffic a worker sleeps in epoll_wait (no busy polling;
 * with open connections it wakes at most a few times a second for timeouts).
 */
module aurora.server;

import core.atomic;
import core.stdc.errno;
import core.stdc.stdlib : calloc, free, realloc;
import core.stdc.string : memmove;
import core.sys.linux.epoll;
import core.sys.linux.sys.eventfd : eventfd, EFD_NONBLOCK, EFD_CLOEXEC;
import core.sys.linux.time : clock_gettime, timespec, CLOCK_MONOTONIC, CLOCK_MONOTONIC_COARSE;
import core.sys.posix.netinet.in_;
import core.sys.posix.netinet.tcp : TCP_NODELAY;
import core.sys.posix.sys.socket;
import core.sys.posix.unistd : read, write, close;
import core.sys.posix.sys.uio : iovec, writev;
import core.sys.posix.arpa.inet : inet_pton;

import aurora.date : refreshDate;
import aurora.metrics;
import aurora.parser;
import aurora.response;
import aurora.router;
import aurora.middleware : Middleware;
import aurora.offload : Completions, Job;
import aurora.task : FiberPool, HandlerFiber, runFiber;
import aurora.tls : SSL, TlsContext, Want, tlsClose, tlsEstablished, tlsFree, tlsRecv, tlsSend;

extern (C) int accept4(int, sockaddr*, socklen_t*, int) nothrow @nogc;
private enum SOCK_NONBLOCK_ = 0x800, SOCK_CLOEXEC_ = 0x80000;

struct ServerConfig
{
    string host = "127.0.0.1";
    ushort port = 8083;
    uint workers = 0;                 /// 0: one per CPU this process may run on
    uint offloadThreads = 16;         /// threads that run the blocking work handlers `offload`
    string serverName = "aurora";     /// the Server header ("" sends none)
    string serviceName = "aurora_app"; /// the `service` label of the metrics, the prefix of log lines
    Limits limits;
    uint headerTimeoutMs = 10_000;    /// whole header section must arrive within this
    uint requestTimeoutMs = 60_000;   /// whole request (header section and body) must arrive within this
    uint idleTimeoutMs = 30_000;      /// keep-alive idle / no-progress timeout
    uint drainTimeoutMs = 10_000;     /// graceful shutdown: give up after this
    uint lingerMs = 2_000;            /// after a closing response, wait for the peer's FIN
    uint maxConnections = 20_000;     /// over all workers; more get 503 and are closed
    string tlsCert;                   /// PEM certificate chain: with tlsKey, every connection speaks TLS
    string tlsKey;                    /// PEM private key of tlsCert
    int backlog = 4096;
    bool metrics = true;              /// false: the request path records nothing (--no-metrics)
}

private enum size_t readChunk = 4096;       // a connection's own read buffer: initial size, growth step
private enum size_t scratchSize = 64 * 1024; // the worker's shared input buffer
private enum size_t highWater = 256 * 1024; // stop parsing while this much output waits
private enum size_t keepBuffer = 64 * 1024; // a busy connection keeps up to this between requests
private enum size_t idleBuffer = readChunk;  // an idle (or closed) connection keeps at most this per buffer
private enum long idleShrinkMs = 1000;      // idle this long, a connection's buffers go back to idleBuffer
private enum size_t maxPooled = 1024;        // closed connections kept for reuse, per worker
private enum ulong idListener = 1, idWake = 2, idResume = 3;

private shared int liveConnections;

// after statusLine(503), which carries the configured Server header
private immutable string busyRest =
    "Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n\r\nconnection limit reached\n";
private immutable string continueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

struct Connection
{
    int fd;
    size_t slot;
    SSL* ssl;             // TLS: the record layer over fd (null: plain)
    Buffer rbuf;
    Buffer wbuf;
    size_t rconsumed;     // bytes of rbuf already answered
    size_t wsent;         // bytes of wbuf already written
    Parser parser;
    long lastActivityMs;
    long requestStartMs;  // first byte of the current request
    long lingerUntilMs;
    bool inRequest;       // some bytes of an unanswered request are buffered
    bool closeAfterWrite;
    bool lingering;       // response sent, write side shut, waiting for EOF
    bool writeBlocked;
    bool readPaused;      // stopped parsing/reading because of output backpressure
    bool peerClosed;
    bool finSeen;         // epoll reported the peer's FIN (EPOLLRDHUP): read on to EOF
    bool sentContinue;
    bool handshaking;     // TLS handshake not over yet: the header timeout runs from the accept
    bool readWantsWrite;  // TLS: a read (the handshake) waits for the socket to be writable
    bool suspended;       // a fiber handler waits for offloaded work: no reads, writes or closes until it returns
    bool broken;          // the socket failed while suspended: close when the handler returns
    HandlerFiber fiber;   // the waiting handler (kept alive by the worker's FiberPool)
    Connection* nextFree;
}

long monoMs() @nogc nothrow
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1_000_000;
}

ulong monoNs() @nogc nothrow
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1_000_000_000UL + ts.tv_nsec;
}

/// Publish the calling worker's GC allocation counter (used by /metrics).
void publishGcCounter() @nogc nothrow
{
    if (currentWorker !is null)
        publishGc(currentWorker.metrics);
}

private Worker* currentWorker; // thread-local

struct Worker
{
    int id;
    int epfd = -1;
    int listenFd = -1;
    int wakeFd = -1;
    const(ServerConfig)* cfg;
    const(Router)* router;
    WorkerMetrics* metrics;
    TlsContext tls;         // null: plain HTTP

    Connection** conns;
    size_t nconns, capConns;
    Connection* freeList;
    size_t nfree;           // connections in freeList
    long pooledBytes;       // buffer capacity held by the connections in freeList

    Request req;
    Params params;
    FiberPool fibers;
    HandlerFiber pumpHead; // streams whose output is to be written this turn
    HeaderBag bag;      // headers middleware and handlers add to the request being dispatched
    Completions done;   // offloaded jobs that finished: their fibers go on
    Buffer scratchIn;   // shared input buffer: requests that arrive whole never touch the connection's
    Buffer scratchOut;  // shared output buffer: written out before the worker moves on
    long nowMs;
    bool record;        // cfg.metrics: time requests and sample hot paths (metrics.sampler: one in 64)
    bool hotWrite;      // the batch being built holds a timed request: time its write
    bool shuttingDown;
    bool listenerPaused;
    long drainDeadlineMs;

@nogc nothrow:

    /// Set up epoll for an already bound, listening, non-blocking socket.
    bool setup(int lfd)
    {
        listenFd = lfd;
        epfd = epoll_create1(EPOLL_CLOEXEC);
        wakeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        const resumeFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (epfd < 0 || wakeFd < 0 || resumeFd < 0)
            return false;
        done.setup(resumeFd);
        epoll_event ev;
        ev.events = EPOLLIN;
        ev.data.u64 = idListener;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, listenFd, &ev) != 0)
            return false;
        ev.data.u64 = idResume;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, resumeFd, &ev) != 0)
            return false;
        ev.data.u64 = idWake;
        return epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFd, &ev) == 0;
    }

    /// Ask the worker (from any thread) to shut down gracefully.
    void wake() shared
    {
        ulong one = 1;
        write((cast(Worker*)&this).wakeFd, &one, one.sizeof);
    }

    void run()
    {
        currentWorker = &this;
        record = cfg.metrics;
        epoll_event[256] events;
        nowMs = monoMs();
        long lastSweep = nowMs;
        uint minTimeout = cfg.headerTimeoutMs < cfg.idleTimeoutMs ? cfg.headerTimeoutMs : cfg.idleTimeoutMs;
        if (cfg.requestTimeoutMs < minTimeout)
            minTimeout = cfg.requestTimeoutMs;
        int sweepEvery = cast(int)(minTimeout / 4);
        if (sweepEvery < 10) sweepEvery = 10;
        if (sweepEvery > 1000) sweepEvery = 1000;
        publishGcCounter();

        for (;;)
        {
            if (shuttingDown && nconns == 0)
                break;
            // no connections: sleep until something happens
            const timeout = pumpHead !is null ? 0 : (nconns || listenerPaused) ? sweepEvery : -1;
            const n = epoll_wait(epfd, events.ptr, cast(int) events.length, timeout);
            if (n < 0 && errno != EINTR)
                break;
            nowMs = monoMs();
            refreshDate();
            foreach (ref ev; events[0 .. n > 0 ? n : 0])
            {
                if (ev.data.u64 == idListener)
                    acceptAll();
                else if (ev.data.u64 == idWake)
                    beginShutdown();
                else if (ev.data.u64 == idResume)
                    resumeFinished();
                else
                    onEvent(cast(Connection*) ev.data.ptr, ev.events);
            }
            if (nowMs - lastSweep >= sweepEvery)
            {
                lastSweep = nowMs;
                sweep();
            }
            if (pumpHead !is null)
                runPumps();
        }
        foreach_reverse (i; 0 .. nconns)
            closeConn(conns[i]);
        trimPool(0);
        free(conns);
        scratchIn.release();
        scratchOut.release();
        if (listenFd >= 0)
            close(listenFd);
        close(wakeFd);
        close(done.eventFd);
        close(epfd);
        publishGcCounter();
    }

private:
    void acceptAll()
    {
        while (!shuttingDown)
        {
            const fd = accept4(listenFd, null, null, SOCK_NONBLOCK_ | SOCK_CLOEXEC_);
            if (fd < 0)
            {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                {
                    // out of descriptors/memory: stop listening until the next
                    // sweep instead of spinning on a level-triggered listener
                    epoll_ctl(epfd, EPOLL_CTL_DEL, listenFd, null);
                    listenerPaused = true;
                }
                return; // EAGAIN: accepted everything pending
            }
            if (atomicOp!"+="(liveConnections, 1) > cfg.maxConnections)
            {
                atomicOp!"-="(liveConnections, 1);
                connectionRejected(metrics);
                if (tls !is null)
                {   // no handshake for a connection that is turned away
                    close(fd);
                    continue;
                }
                const head = statusLine(503);
                iovec[2] parts = [iovec(cast(void*) head.ptr, head.length),
                                  iovec(cast(void*) busyRest.ptr, busyRest.length)];
                writev(fd, parts.ptr, 2);
                shutdown(fd, SHUT_WR);
                close(fd);
                continue;
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, one.sizeof);
            auto c = newConn();
            if (c is null)
            {
                atomicOp!"-="(liveConnections, 1);
                close(fd);
                continue;
            }
            c.fd = fd;
            c.lastActivityMs = nowMs;
            connectionAccepted(metrics);
            if (tls !is null)
            {
                c.ssl = tls.accept(fd);
                c.handshaking = true;
                c.requestStartMs = nowMs;
                if (c.ssl is null)
                {
                    closeConn(c);
                    continue;
                }
            }
            epoll_event ev;
            ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
            ev.data.ptr = c;
            if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
                closeConn(c);
        }
    }

    Connection* newConn()
    {
        if (nconns == capConns)
        {
            const ncap = capConns ? capConns * 2 : 256;
            auto p = cast(Connection**) realloc(conns, ncap * (Connection*).sizeof);
            if (p is null)
                return null;
            conns = p;
            capConns = ncap;
        }
        Connection* c;
        if (freeList)
        {
            c = freeList;
            freeList = c.nextFree;
            nfree--;
            pooledBytes -= c.rbuf.cap + c.wbuf.cap;
        }
        else
        {
            c = cast(Connection*) calloc(1, Connection.sizeof);
            if (c is null)
                return null;
        }
        // keep the buffers of a recycled connection, reset everything else
        auto rb = c.rbuf.ptr, rc = c.rbuf.cap, wb = c.wbuf.ptr, wc = c.wbuf.cap;
        *c = Connection.init;
        c.rbuf.ptr = rb;
        c.rbuf.cap = rc;
        c.wbuf.ptr = wb;
        c.wbuf.cap = wc;
        c.parser.limits = cfg.limits;
        c.slot = nconns;
        conns[nconns++] = c;
        return c;
    }

    void closeConn(Connection* c)
    {
        if (c.suspended)
        {   // its handler still writes into c: closed when it returns
            c.broken = true;
            return;
        }
        if (c.ssl !is null)
        {
            tlsFree(c.ssl);
            c.ssl = null;
        }
        close(c.fd); // also removes it from the epoll set
        c.fd = -1;
        atomicOp!"-="(liveConnections, 1);
        connectionClosed(metrics);
        // unlink: move the last connection into this slot
        auto last = conns[--nconns];
        conns[c.slot] = last;
        last.slot = c.slot;
        c.rbuf.len = c.wbuf.len = 0;
        c.rbuf.failed = c.wbuf.failed = false;
        c.rbuf.shrink(idleBuffer);
        c.wbuf.shrink(idleBuffer);
        // kept for reuse (never freed here: callers may still look at c.fd);
        // the sweep trims the pool to maxPooled
        c.nextFree = freeList;
        freeList = c;
        nfree++;
        pooledBytes += c.rbuf.cap + c.wbuf.cap;
    }

    /// Free pooled connections (and their buffers) beyond `keep`.
    void trimPool(size_t keep)
    {
        while (nfree > keep)
        {
            auto c = freeList;
            freeList = c.nextFree;
            nfree--;
            pooledBytes -= c.rbuf.cap + c.wbuf.cap;
            c.rbuf.release();
            c.wbuf.release();
            free(c);
        }
    }

    void onEvent(Connection* c, uint ev)
    {
        if (c.fd < 0)
            return; // closed earlier in this batch of events (e.g. by shutdown)
        if (c.suspended)
        {   // looked at when its handler returns; a stream waiting for the socket goes on
            c.broken = c.broken || (ev & (EPOLLERR | EPOLLHUP)) != 0;
            c.finSeen = c.finSeen || (ev & (EPOLLRDHUP | EPOLLHUP)) != 0;
            if (c.fiber.wantsSend && (c.broken || (ev & EPOLLOUT)))
                schedulePump(c.fiber);
            return;
        }
        if (ev & EPOLLERR)
        {
            closeConn(c);
            return;
        }
        // edge-triggered: the FIN is reported once, maybe together with the
        // request before it; remember it so that reading goes on to EOF
        if (ev & (EPOLLRDHUP | EPOLLHUP))
            c.finSeen = true;
        if ((ev & EPOLLOUT) && c.readWantsWrite)
            ev |= EPOLLIN; // the handshake can go on
        if ((ev & EPOLLOUT) && c.writeBlocked)
        {
            if (!flush(c))
                return; // closed
            if (c.writeBlocked)
                return;
            if (c.readPaused)
            {
                c.readPaused = false;
                onReadable(c);
                return;
            }
            if (c.peerClosed && !c.lingering)
            {   // the last output for a peer that has gone
                closeConn(c);
                return;
            }
        }
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
            onReadable(c);
    }

    /// Where the next bytes from `c` are read to: its own buffer while it
    /// holds part of a request, else the worker's shared input buffer.
    Buffer* inputOf(Connection* c) return { return c.rbuf.len ? &c.rbuf : &scratchIn; }

    /// Where responses for `c` are written: its own buffer while earlier
    /// output is still waiting for the socket (keeps the order), else the
    /// worker's shared output buffer.
    Buffer* outputOf(Connection* c) return { return c.wbuf.len ? &c.wbuf : &scratchOut; }

    /// Read, parse and answer; one write per batch of responses.
    void onReadable(Connection* c)
    {
        if (c.suspended)
            return;
        if (c.lingering)
        {
            drainLinger(c);
            return;
        }
        const hardCap = cfg.limits.maxHeaderBytes + cfg.limits.maxBody + 2 * readChunk;
        for (;;)
        {
            if (c.rbuf.len)
                process(c, &c.rbuf); // requests left over from a batch paused by backpressure
            while (!c.readPaused && !c.closeAfterWrite && !c.peerClosed)
            {
                auto inb = inputOf(c);
                if (inb.cap - inb.len < readChunk / 4)
                {
                    if (inb.len >= hardCap || !inb.reserve(inb is &scratchIn ? scratchSize : readChunk))
                    {
                        sendError(c, 431, "request too large");
                        break;
                    }
                }
                const space = inb.cap - inb.len;
                const n = recvFrom(c, inb.ptr + inb.len, space);
                if (n > 0)
                {
                    inb.len += n;
                    c.lastActivityMs = nowMs;
                    if (!c.inRequest)
                    {
                        c.inRequest = true;
                        c.requestStartMs = nowMs;
                    }
                    process(c, inb);
                    if (cast(size_t) n < space && !c.finSeen && c.ssl is null)
                        break; // drained: edge-triggered epoll reports new data
                    // (after a FIN, read on: the next read returns EOF; TLS hands out one record per read:
                    // read on until it says the socket is empty)
                }
                else if (n == 0)
                    c.peerClosed = true;
                else if (errno == EINTR)
                    continue;
                else if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                else
                {
                    scratchOut.len = 0;
                    hotWrite = false;
                    closeConn(c);
                    return;
                }
            }
            if (!flush(c))
                return;
            if (c.readPaused && !c.writeBlocked && !c.lingering && !c.suspended)
            {
                c.readPaused = false;
                continue;
            }
            break;
        }
        if (c.peerClosed && !c.writeBlocked && !c.lingering)
            closeConn(c);
    }

    /// Parse and answer every complete request in `inb` (the connection's
    /// buffer or the shared one); what is left of a partial request ends up
    /// at the start of the connection's own buffer.
    void process(Connection* c, Buffer* inb)
    {
        size_t done = inb is &c.rbuf ? c.rconsumed : 0;
        while (!c.closeAfterWrite)
        {
            auto outb = outputOf(c);
            if (outb.len >= highWater)
            {
                c.readPaused = true;
                break;
            }
            const start = done;
            if (start == inb.len)
                break;
            size_t len = inb.len - start;
            // hot-path sample: this request is timed (parse, handle, the batch's write)
            const timed = record && metrics.sampler.due();
            auto parseSpan = HotSpan.start(timed);
            const st = c.parser.parse(inb.ptr + start, len, req);
            inb.len = start + len; // chunked decoding may have squeezed the tail
            if (st != ParseStatus.needMore && record)
            {
                metrics.sampler.advance();
                parseSpan.stop(metrics, Hotpath.parse);
                hotWrite = hotWrite || timed;
            }
            if (st == ParseStatus.needMore)
            {
                // the head is complete (parsed into `req` by this very call)
                // and the body pending: 100 Continue only for a request that
                // will be served; otherwise the final status right away, and
                // the connection closes after it (its body is drained, unread)
                if (c.parser.expectContinue && !c.sentContinue)
                {
                    c.sentContinue = true;
                    if (willServe())
                        outb.put(continueResponse);
                    else
                    {
                        c.closeAfterWrite = true;
                        dispatch(c, outb, false);
                        done = inb.len;
                    }
                }
                break;
            }
            if (st == ParseStatus.error)
            {
                sendError(c, c.parser.errorStatus, c.parser.errorReason);
                done = inb.len; // the rest of the input is not looked at
                break;
            }
            dispatch(c, outb, timed);
            if (c.suspended)
            {   // the request stays in the input until its handler returns (resumeFinished goes on)
                done = start;
                c.readPaused = true;
                break;
            }
            done = start + c.parser.consumed;
            c.parser.reset();
            c.sentContinue = false;
            c.requestStartMs = nowMs;
            if (!req.keepAlive || shuttingDown)
                c.closeAfterWrite = true;
        }
        if (done == inb.len || c.closeAfterWrite)
        {
            // everything answered (or nothing more will be)
            inb.len = 0;
            c.rconsumed = 0;
            c.inRequest = false;
        }
        else if (inb is &scratchIn)
        {
            // keep the partial request: the shared buffer is reused right away
            const rest = inb.len - done;
            c.rbuf.len = 0;
            if (c.rbuf.reserve(rest < readChunk ? readChunk : rest))
            {
                c.rbuf.put(inb.ptr[done .. inb.len]);
                c.rconsumed = 0;
                if (c.suspended) // the waiting handler's request moved with its bytes
                    c.fiber.rebase(inb.ptr + done, rest, c.rbuf.ptr);
            }
            else
            {   // out of memory: drop the connection after what was answered
                c.rbuf.failed = false;
                c.closeAfterWrite = true;
                c.inRequest = false;
                if (c.suspended) // its request's bytes are gone: it sees an empty request
                    c.fiber.forgetRequest();
            }
            inb.len = 0;
        }
        else if (c.readPaused)
            c.rconsumed = done;
        else if (done > 0)
        {
            memmove(inb.ptr, inb.ptr + done, inb.len - done);
            inb.len -= done;
            c.rconsumed = 0;
        }
    }

    /// Whether `req` (head parsed) has a route that will answer it.
    bool willServe()
    {
        return req.method != Method.OTHER && router.match(req.method, req.path, params).route >= 0;
    }

    void dispatch(Connection* c, Buffer* outb, bool timed)
    {
        const t0 = record || router.middleware.length || router.routeMiddleware ? monoNs() : 0;
        const keep = req.keepAlive && !shuttingDown && !c.closeAfterWrite;
        auto res = Response(outb, req.method == Method.HEAD, keep, req.minorVersion == 0);
        bag.len = 0;
        res.bag = &bag;
        size_t ranGlobal, ranLocal;
        int route = -1;
        if (!runBefore(router.middleware, res, ranGlobal))
        {
            route = routeRequest(*router, req, params, res);
            if (route >= 0 && !runBefore(router.routes[route].chain, res, ranLocal))
            {
                auto fast = router.routes[route].fast;
                if (fast is null)
                {
                    startFiber(c, res, route, timed, t0, ranGlobal, ranLocal);
                    return;
                }
                fast(req, res, params);
            }
        }
        settle(res);
        if (!res.keepAlive)
            c.closeAfterWrite = true; // (an HTTP/1.0 body of unknown length ends with the connection)
        runAfter(route, ranGlobal, ranLocal, req, res, t0);
        observeRequest(route, req, res.status, t0, timed);
    }

    /// The `before` of each middleware of `chain` until one answers (true); `ran` counts those that ran.
    bool runBefore(const(Middleware)[] chain, ref Response res, ref size_t ran)
    {
        foreach (ref m; chain)
        {
            ran++;
            if (m.before !is null && m.before(req, res))
                return true;
        }
        return false;
    }

    /// The `after` of every middleware whose `before` ran, in reverse order.
    void runAfter(int route, size_t ranGlobal, size_t ranLocal, ref const Request r, ref const Response res,
                  ulong t0)
    {
        if (ranGlobal + ranLocal == 0)
            return;
        const ns = monoNs() - t0;
        if (route >= 0)
            foreach_reverse (ref m; router.routes[route].chain[0 .. ranLocal])
                if (m.after !is null)
                    m.after(r, res, ns);
        foreach_reverse (ref m; router.middleware[0 .. ranGlobal])
            if (m.after !is null)
                m.after(r, res, ns);
    }

    /// Record one answered request (route -1: 404, 405, 501, OPTIONS *).
    void observeRequest(int route, ref const Request r, ushort status, ulong t0, bool timed)
    {
        if (!record)
            return;
        const label = route >= 0 ? routeLabel(route) : unmatchedRoute();
        const ns = monoNs() - t0;
        observe(metrics, label, r.method, r.methodText, status, ns);
        if (timed) // the same interval: router + handler building the response
            observeHot(metrics, Hotpath.handle, ns);
    }

    /// Run the route's fiber handler. When it waits for offloaded work, `c` is suspended: its response goes to
    /// its own buffer (the shared one is written out before the worker moves on).
    void startFiber(Connection* c, ref Response res, int route, bool timed, ulong t0, size_t ranGlobal,
                    size_t ranLocal)
    {
        auto f = fibers.take(&done);
        f.req.copyFrom(req);
        f.params.copyFrom(params);
        f.bag.copyFrom(bag);
        f.res = res;
        f.res.bag = &f.bag;
        f.ranGlobal = ranGlobal;
        f.ranLocal = ranLocal;
        f.handler = router.routes[route].slow;
        f.conn = c;
        f.sockFd = c.ssl is null ? c.fd : -1; // (TLS: no sendfile)
        f.route = route;
        f.timed = timed;
        f.startNs = t0;
        if (runFiber(f, true))
        {
            if (finishFiber(f))
                c.closeAfterWrite = true;
            return;
        }
        c.suspended = true;
        c.fiber = f;
        if (f.res.buf is &scratchOut)
        {
            c.wbuf.put(scratchOut.data); // c.wbuf is empty while the shared buffer is in use: offsets hold
            scratchOut.len = 0;
            f.res.buf = &c.wbuf;
        }
        afterYield(f);
    }

    /// `f` yielded for its output: write it now, or (sendfile met a full socket) once the socket is writable.
    void afterYield(HandlerFiber f)
    {
        if (!f.wantsSend)
            return; // it waits for an offloaded job
        if (f.waitWritable)
            (cast(Connection*) f.conn).writeBlocked = true; // EPOLLOUT schedules the pump
        else
            schedulePump(f);
    }

    /// A fiber handler returned: check its response, record it, give the fiber back. True when the connection
    /// must close after it (a body that ends with the connection, or a streamed response that broke).
    bool finishFiber(HandlerFiber f)
    {
        settle(f.res);
        const close = !f.res.complete || !f.res.keepAlive;
        runAfter(f.route, f.ranGlobal, f.ranLocal, f.req, f.res, f.startNs);
        observeRequest(f.route, f.req, f.res.status, f.startNs, f.timed);
        fibers.give(f);
        return close;
    }

    /// Resume `f` (its job finished, or its output was sent) and follow where it goes next.
    void step(HandlerFiber f)
    {
        if (runFiber(f, false))
            completeSuspended(f);
        else
            afterYield(f);
    }

    /// `f` flushed part of a streamed response: write its connection's output in the event loop's next turn.
    void schedulePump(HandlerFiber f)
    {
        if (f.pumpQueued)
            return;
        f.pumpQueued = true;
        f.nextPump = pumpHead;
        pumpHead = f;
    }

    /// The pumps scheduled so far (those they schedule in turn wait for the next turn: one stream cannot keep
    /// the worker from its other connections).
    void runPumps()
    {
        auto f = pumpHead;
        pumpHead = null;
        while (f !is null)
        {
            auto next = f.nextPump;
            f.nextPump = null;
            f.pumpQueued = false;
            pump(f);
            f = next;
        }
    }

    /// Write what the stream's connection holds; once all is out (or the client is gone), resume the handler.
    void pump(HandlerFiber f)
    {
        auto c = cast(Connection*) f.conn;
        if (f.waitWritable)
        {   // the socket took what sendfile gave it: that was progress
            f.waitWritable = false;
            c.lastActivityMs = nowMs;
        }
        if (!c.broken)
        {
            const r = writeOut(c, c.wbuf.ptr, c.wbuf.len, c.wsent);
            if (r == Sent.blocked)
            {
                c.writeBlocked = true; // EPOLLOUT (or the idle timeout) schedules it again
                return;
            }
            c.broken = r == Sent.failed;
        }
        c.writeBlocked = false;
        f.res.shiftDown(c.wbuf.len);
        c.wbuf.len = c.wsent = 0;
        f.res.committed = true;
        f.wantsSend = false;
        f.streamBroken = c.broken;
        step(f);
    }

    /// The offloaded jobs that finished: their fibers go on; a handler that returns completes its request and
    /// its connection carries on with what it has buffered or what arrived meanwhile.
    void resumeFinished()
    {
        auto j = done.takeAll();
        while (j !is null)
        {
            auto f = cast(HandlerFiber) j.owner;
            j = j.next; // the job lives on the fiber's stack: read before resuming it
            step(f);
        }
    }

    void completeSuspended(HandlerFiber f)
    {
        auto c = cast(Connection*) f.conn;
        const keep = f.req.keepAlive && !finishFiber(f);
        c.suspended = false;
        c.fiber = null;
        c.readPaused = false;
        c.lastActivityMs = nowMs;
        if (c.broken)
        {
            closeConn(c);
            return;
        }
        // its request is answered: drop its bytes, go on with the rest
        c.rconsumed += c.parser.consumed;
        c.parser.reset();
        c.sentContinue = false;
        c.requestStartMs = nowMs;
        if (!keep || shuttingDown)
            c.closeAfterWrite = true;
        if (c.rconsumed >= c.rbuf.len || c.closeAfterWrite)
        {
            c.rbuf.len = c.rconsumed = 0;
            c.inRequest = false;
        }
        onReadable(c);
        if (c.fd >= 0 && !c.suspended && c.wbuf.len && !c.writeBlocked)
            flush(c);
    }

    /// Answer with an error and close after the write; the input is dropped.
    void sendError(Connection* c, ushort status, const(char)[] reason)
    {
        auto res = Response(outputOf(c), false, false);
        res.begin(status, "text/plain");
        res.put(reason);
        res.putChar('\n');
        res.finish();
        if (record)
            observe(metrics, invalidRoute(), Method.OTHER, null, status, 0);
        c.closeAfterWrite = true;
        c.rbuf.len = c.rconsumed = 0;
        c.inRequest = false;
    }

    /// Write out the batch; false if the connection was closed. Output that
    /// the socket does not take now moves to the connection's own buffer.
    bool flush(Connection* c)
    {
        if (c.suspended)
            return true; // its handler may be half-way through a response: written when it returns
        auto writeSpan = HotSpan.start(hotWrite);
        hotWrite = false;
        const w = writeBatch(c);
        if (w != WriteResult.closed)
            writeSpan.stop(metrics, Hotpath.write);
        if (w == WriteResult.closed)
            return false;
        if (w == WriteResult.blocked)
            return true;
        c.writeBlocked = false;
        if (c.closeAfterWrite && !c.lingering)
        {
            // half-close, then read until the peer's FIN so our response is
            // not destroyed by a reset caused by unread request bytes
            if (c.ssl !is null)
                tlsClose(c.ssl);
            shutdown(c.fd, SHUT_WR);
            c.lingering = true;
            c.lingerUntilMs = nowMs + cfg.lingerMs;
            drainLinger(c);
            return c.fd >= 0;
        }
        if (!c.inRequest)
        {
            c.rbuf.shrink(keepBuffer);
            c.wbuf.shrink(keepBuffer);
        }
        return true;
    }

    enum WriteResult { done, blocked, closed }

    /// The socket writes of a batch: the shared output buffer, or what the
    /// connection's own buffer still holds.
    WriteResult writeBatch(Connection* c)
    {
        if (c.wbuf.len == 0)
        {
            // the common case: the batch is in the shared buffer
            if (scratchOut.failed)
            {
                scratchOut.len = 0;
                scratchOut.failed = false;
                closeConn(c);
                return WriteResult.closed;
            }
            size_t sent = 0;
            const r = writeOut(c, scratchOut.ptr, scratchOut.len, sent);
            if (r == Sent.blocked)
                c.wbuf.put(scratchOut.ptr[sent .. scratchOut.len]); // the rest waits for EPOLLOUT
            scratchOut.len = 0;
            c.wsent = 0;
            if (r == Sent.failed || c.wbuf.failed)
            {
                closeConn(c);
                return WriteResult.closed;
            }
            if (r == Sent.blocked)
            {
                c.writeBlocked = true;
                return WriteResult.blocked;
            }
            return WriteResult.done;
        }
        if (c.wbuf.failed)
        {
            closeConn(c);
            return WriteResult.closed;
        }
        final switch (writeOut(c, c.wbuf.ptr, c.wbuf.len, c.wsent))
        {
        case Sent.all:
            c.wbuf.len = c.wsent = 0;
            return WriteResult.done;
        case Sent.blocked:
            c.writeBlocked = true;
            return WriteResult.blocked;
        case Sent.failed:
            closeConn(c);
            return WriteResult.closed;
        }
    }

    enum Sent { all, blocked, failed }

    /// read(2) from the connection: its socket, or the TLS record layer over it.
    ptrdiff_t recvFrom(Connection* c, void* p, size_t len)
    {
        if (c.ssl is null)
            return read(c.fd, p, len);
        Want want;
        const n = tlsRecv(c.ssl, p, len, want);
        c.readWantsWrite = n < 0 && want == Want.write;
        if (c.handshaking && tlsEstablished(c.ssl))
            c.handshaking = false;
        return n;
    }

    /// write(2) to the connection: its socket, or the TLS record layer over it. (A TLS write that waits for
    /// the socket to be readable goes on from onReadable, which flushes after reading.)
    ptrdiff_t sendTo(Connection* c, const(void)* p, size_t len)
    {
        if (c.ssl is null)
            return write(c.fd, p, len);
        Want want;
        return tlsSend(c.ssl, p, len, want);
    }

    /// `write` bytes `sent .. len` of `p` until all are out, the socket is full, or it fails.
    Sent writeOut(Connection* c, const(ubyte)* p, size_t len, ref size_t sent)
    {
        while (sent < len)
        {
            const n = sendTo(c, p + sent, len - sent);
            if (n > 0)
            {
                sent += n;
                c.lastActivityMs = nowMs;
            }
            else if (n < 0 && errno == EINTR)
                continue;
            else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return Sent.blocked;
            else
                return Sent.failed;
        }
        return Sent.all;
    }

    void drainLinger(Connection* c)
    {
        ubyte[512] sink;
        for (;;)
        {
            const n = read(c.fd, sink.ptr, sink.length);
            if (n > 0)
                continue;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return;
            closeConn(c);
            return;
        }
    }

    void sweep()
    {
        if (listenerPaused && !shuttingDown)
        {
            epoll_event ev;
            ev.events = EPOLLIN;
            ev.data.u64 = idListener;
            if (epoll_ctl(epfd, EPOLL_CTL_ADD, listenFd, &ev) == 0)
                listenerPaused = false;
        }
        long bufBytes = 0;
        foreach_reverse (i; 0 .. nconns)
        {
            auto c = conns[i];
            if (c.suspended)
            {   // its handler waits for offloaded work (a drain waits for it too), or for the client to take a
                // streamed response: that one has the idle timeout
                if (c.writeBlocked && nowMs - c.lastActivityMs >= cfg.idleTimeoutMs)
                {
                    c.broken = true;
                    schedulePump(c.fiber);
                }
                continue;
            }
            if (c.lingering)
            {
                if (nowMs >= c.lingerUntilMs)
                    closeConn(c);
                continue;
            }
            if (shuttingDown && nowMs >= drainDeadlineMs)
            {
                closeConn(c);
                continue;
            }
            if (c.handshaking)
            {
                if (nowMs - c.requestStartMs >= cfg.headerTimeoutMs)
                    closeConn(c);
                continue;
            }
            const idleFor = nowMs - c.lastActivityMs;
            if (c.writeBlocked)
            {
                if (idleFor >= cfg.idleTimeoutMs)
                    closeConn(c);
            }
            else if (c.inRequest)
            {
                // header section: its own deadline; the whole request: the
                // request deadline, however steadily bytes trickle in; and no
                // progress for the idle timeout
                const requestFor = nowMs - c.requestStartMs;
                if ((!c.parser.headComplete && requestFor >= cfg.headerTimeoutMs)
                        || requestFor >= cfg.requestTimeoutMs || idleFor >= cfg.idleTimeoutMs)
                    timeoutRequest(c);
            }
            else if (idleFor >= cfg.idleTimeoutMs || shuttingDown)
                closeConn(c);
            else
            {   // idle keep-alive connection: back to the small buffers (not one that is merely between two
                // requests of a steady stream: it would only grow them again)
                if (idleFor >= idleShrinkMs)
                {
                    c.rbuf.shrink(idleBuffer);
                    c.wbuf.shrink(idleBuffer);
                }
                bufBytes += c.rbuf.cap + c.wbuf.cap;
            }
        }
        trimPool(maxPooled);
        setBufferBytes(metrics, bufBytes + pooledBytes);
        publishGcCounter();
    }

    void timeoutRequest(Connection* c)
    {
        sendError(c, 408, "request timeout");
        flush(c);
    }

    void beginShutdown()
    {
        ulong v;
        read(wakeFd, &v, v.sizeof);
        if (shuttingDown)
            return;
        drainDeadlineMs = nowMs + cfg.drainTimeoutMs;
        // idle keep-alive connections go now (freeing descriptors); busy ones after their response
        foreach_reverse (i; 0 .. nconns)
        {
            auto c = conns[i];
            if (!c.inRequest && !c.writeBlocked && !c.lingering && !c.suspended)
                closeConn(c);
        }
        // closing the listener would reset the connections still in its queue: take them first, and answer
        // what they have sent (those that have sent nothing go at the next sweep)
        const known = nconns;
        acceptAll();
        shuttingDown = true;
        foreach_reverse (i; known .. nconns)
            onReadable(conns[i]);
        close(listenFd);
        listenFd = -1;
    }
}

/**
 * Route a parsed request: 501 for a method the server does not implement, `OPTIONS *` with the server's Allow,
 * 404/405 are answered into `res` here (-1 is returned); else the route's index, its handler to be run.
 */
int routeRequest(ref const Router router, ref const Request req, ref Params params, ref Response res) @nogc nothrow
{
    if (req.method == Method.OTHER)
    {
        res.send(501, "text/plain", "method not implemented\n");
        return -1;
    }
    if (req.method == Method.OPTIONS && req.path == "*")
    {
        res.send(200, null, null, router.allowAll);
        return -1;
    }
    const m = router.match(req.method, req.path, params);
    if (m.route >= 0)
        return m.route;
    if (m.allowHeader.length)
        res.send(405, "text/plain", "method not allowed\n", m.allowHeader);
    else
        res.send(404, "text/plain", "not found\n");
    return -1;
}

/**
 * A handler that misused the builder, or wrote no response, never gets a broken response out: what it wrote is
 * taken back and one clean 500 is written instead.
 */
void settle(ref Response res) @nogc nothrow
{
    if (res.complete)
        return;
    res.discard();
    res.send(500, "text/plain", "handler error\n");
}

/// A listening address: `host` is an IPv4 address, an IPv6 address (with or without brackets) or
/// `localhost` (127.0.0.1). False when it is none of these.
private bool listenAddress(string host, ushort port, ref sockaddr_storage ss, ref socklen_t len, ref int family) nothrow
{
    import std.string : toStringz;

    string h = host == "localhost" ? "127.0.0.1" : host;
    if (h.length >= 2 && h[0] == '[' && h[$ - 1] == ']')
        h = h[1 .. $ - 1];
    const(char)* hz;
    try
        hz = toStringz(h);
    catch (Exception)
        return false;
    ss = sockaddr_storage.init;
    auto v4 = cast(sockaddr_in*)&ss;
    if (inet_pton(AF_INET, hz, &v4.sin_addr) == 1)
    {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        family = AF_INET;
        len = sockaddr_in.sizeof;
        return true;
    }
    auto v6 = cast(sockaddr_in6*)&ss;
    if (inet_pton(AF_INET6, hz, &v6.sin6_addr) == 1)
    {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        family = AF_INET6;
        len = sockaddr_in6.sizeof;
        return true;
    }
    return false;
}

/// Whether another socket already listens on host:port. Our listeners use
/// SO_REUSEPORT, which would otherwise let a second server start on a busy
/// port and silently take a share of its connections.
bool portTaken(string host, ushort port) nothrow
{
    sockaddr_storage ss;
    socklen_t len;
    int family;
    if (!listenAddress(host, port, ss, len, family))
        return false;
    const fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC_, 0);
    if (fd < 0)
        return false;
    scope (exit) close(fd);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, one.sizeof);
    return bind(fd, cast(sockaddr*)&ss, len) != 0 && errno == EADDRINUSE;
}

/// Create, bind and listen one SO_REUSEPORT socket (IPv4 or IPv6); returns fd or -1.
int openListener(string host, ushort port, int backlog, ref ushort boundPort,
                 out string error) nothrow
{
    sockaddr_storage ss;
    socklen_t len;
    int family;
    if (!listenAddress(host, port, ss, len, family))
    {
        error = "invalid address for --host (an IPv4 or IPv6 address, or localhost): " ~ host;
        return -1;
    }
    const fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK_ | SOCK_CLOEXEC_, 0);
    if (fd < 0)
    {
        error = "socket() failed";
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, one.sizeof);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, one.sizeof);
    if (bind(fd, cast(sockaddr*)&ss, len) != 0)
    {
        error = "cannot bind the address (in use or not permitted)";
        close(fd);
        return -1;
    }
    if (listen(fd, backlog) != 0)
    {
        error = "listen() failed";
        close(fd);
        return -1;
    }
    socklen_t l = ss.sizeof;
    getsockname(fd, cast(sockaddr*)&ss, &l);
    boundPort = family == AF_INET6 ? ntohs((cast(sockaddr_in6*)&ss).sin6_port) : ntohs((cast(sockaddr_in*)&ss).sin_port);
    return fd;
}

version (unittest)
{
    // handlers that misuse the response builder
    private void beginNoFinish(ref const Request, ref Response res, ref const Params) @nogc nothrow
    {
        res.begin(200, "text/plain");
        res.put("partial");
    }

    private void sendTwice(ref const Request, ref Response res, ref const Params) @nogc nothrow
    {
        res.send(200, "text/plain", "one");
        res.send(200, "text/plain", "two");
    }

    private void putAfterSend(ref const Request, ref Response res, ref const Params) @nogc nothrow
    {
        res.send(200, "text/plain", "one");
        res.put("trailing garbage");
    }

    private void beginTwice(ref const Request, ref Response res, ref const Params) @nogc nothrow
    {
        res.begin(200, "text/plain");
        res.put("a");
        res.begin(201, "text/plain");
        res.put("b");
        res.finish();
    }

    private void noResponse(ref const Request, ref Response, ref const Params) @nogc nothrow {}

    private void wellBehaved(ref const Request, ref Response res, ref const Params) @nogc nothrow
    {
        res.begin(200, "text/plain");
        res.put("fine");
        res.finish();
    }

    /// Dispatch one GET of `path` and return exactly what was put in the output buffer.
    private string dispatchOnce(const(char)[] path, ref Router router)
    {
        ServerConfig cfg;
        auto w = new Worker;
        w.cfg = &cfg;
        w.router = &router;
        w.record = false;
        Connection c;
        Parser p;
        char[256] raw;
        const text = "GET " ~ path ~ " HTTP/1.1\r\nHost: t\r\n\r\n";
        raw[0 .. text.length] = text;
        size_t len = text.length;
        assert(p.parse(cast(ubyte*) raw.ptr, len, w.req) == ParseStatus.done);
        Buffer out_;
        scope (exit) out_.release();
        out_.put("PREVIOUS");  // a response already batched for the connection must stay intact
        w.dispatch(&c, &out_, false);
        return (cast(const(char)[]) out_.data).idup;
    }
}

unittest
{   // a handler that misuses the builder yields exactly one clean 500 (never a broken response)
    import std.algorithm.searching : count, endsWith, startsWith;

    Router r;
    r.add(Method.GET, "/begin-no-finish", &beginNoFinish);
    r.add(Method.GET, "/send-twice", &sendTwice);
    r.add(Method.GET, "/put-after-send", &putAfterSend);
    r.add(Method.GET, "/begin-twice", &beginTwice);
    r.add(Method.GET, "/none", &noResponse);
    r.add(Method.GET, "/ok", &wellBehaved);
    foreach (path; ["/begin-no-finish", "/send-twice", "/put-after-send", "/begin-twice", "/none"])
    {
        const s = dispatchOnce(path, r);
        assert(s.startsWith("PREVIOUSHTTP/1.1 500 Internal Server Error\r\n"), path ~ ": " ~ s);
        assert(s.count("HTTP/1.1") == 1, path ~ ": " ~ s);
        assert(s.endsWith("\r\n\r\nhandler error\n"), path ~ ": " ~ s);
        assert(s.count("Content-Length: ") == 1, path ~ ": " ~ s);
    }
    const ok = dispatchOnce("/ok", r);
    assert(ok.startsWith("PREVIOUSHTTP/1.1 200 OK\r\n") && ok.endsWith("Content-Length: 4\r\n\r\nfine"), ok);
}

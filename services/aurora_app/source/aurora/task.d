/**
 * Handler fibers: a fiber handler runs in one of its worker's pooled fibers, so that it can wait for offloaded
 * work while the worker goes on serving other connections. A fiber runs request after request (its function
 * loops), so a pooled fiber costs no allocation per request.
 *
 * The fiber owns copies of the request and parameters: the worker's own are overwritten by the next request
 * it parses while this one waits.
 */
module aurora.task;

import core.sys.posix.sys.types : off_t, ssize_t;
import core.thread : Fiber;

import aurora.offload : Job, JobWaiter, Completions, submit;
import aurora.parser : Request;
import aurora.response : HeaderBag, Response;
import aurora.router : Handler, Params;

/// Stack of a handler fiber: room for handlers that keep a few KiB of locals.
enum fiberStack = 256 * 1024;

final class HandlerFiber : Fiber, JobWaiter
{
    Request req;
    Params params;
    Response res;
    HeaderBag bag;         /// the headers middleware added before the handler started
    size_t ranGlobal, ranLocal; /// middleware whose `before` ran (their `after` runs when it returns)
    Handler handler;
    void* conn;            /// the worker's connection this request came from
    int route;             /// the route index
    bool timed;            /// a sampled request (hot-path timing)
    ulong startNs;         /// when the request was dispatched (for its duration)
    bool finished;         /// the handler has returned (or thrown); false while it waits for a job
    bool wantsSend;        /// it waits for its streamed output to be written (Response.flush)
    bool waitWritable;     /// ... and then for the socket to be writable again (sendfile met a full socket)
    int sockFd = -1;       /// the connection's socket (for sendfile)
    bool streamBroken;     /// the client is gone: its flushes fail from now on
    bool pumpQueued;       /// in the worker's list of streams to write
    HandlerFiber nextPump;
    HandlerFiber nextIdle;
    private Completions* home;

    this(Completions* home)
    {
        this.home = home;
        super(&loop, fiberStack);
    }

    /// Run `handler` for the request in `req`/`params` until it returns or waits; true when it returned.
    bool start()
    {
        finished = wantsSend = streamBroken = false;
        res.sendHook = &sendFromFiber;
        res.fileHook = &sendFileFromFiber;
        res.sendCtx = cast(void*) this;
        call();
        return finished;
    }

    /// Go on after the job it waited for completed; true when the handler returned.
    bool resume()
    {
        call();
        return finished;
    }

    /// The request's bytes moved from `from` (`len` bytes) to `to`.
    void rebase(const(void)* from, size_t len, const(void)* to) nothrow @nogc
    {
        req.rebase(from, len, to);
        params.rebase(from, len, to);
    }

    /// The request's bytes are gone: the handler sees an empty request from now on.
    void forgetRequest() nothrow @nogc
    {
        Request blankRequest;
        Params blankParams;
        req.copyFrom(blankRequest);
        params.copyFrom(blankParams);
    }

    /// Response.flush in a fiber handler: yield until the worker has written the output (or the client left).
    private static bool sendFromFiber(void* ctx) nothrow @nogc
    {
        auto f = cast(HandlerFiber) ctx;
        if (f.streamBroken)
            return false;
        f.wantsSend = true;
        yieldNogc();
        return !f.streamBroken;
    }

    /// Response.fileBody in a fiber handler: the headers, then sendfile(2) from the file to the socket, waiting
    /// for the socket whenever it is full.
    private static bool sendFileFromFiber(void* ctx, int fd, ulong offset, ulong length) nothrow @nogc
    {
        import core.stdc.errno : errno, EINTR, EAGAIN;
        import core.sys.posix.sys.types : off_t, ssize_t;

        auto f = cast(HandlerFiber) ctx;
        if (f.sockFd < 0)
            return sendFileBuffered(f, fd, offset, length);
        if (!sendFromFiber(ctx))
            return false;
        off_t off = cast(off_t) offset;
        ulong left = length;
        while (left)
        {
            if (f.streamBroken)
                return false;
            const n = sendfile(f.sockFd, fd, &off, cast(size_t)(left < (1 << 20) ? left : 1 << 20));
            if (n > 0)
            {
                left -= n;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
            {
                f.wantsSend = f.waitWritable = true;
                yieldNogc();
                continue;
            }
            return false; // the client is gone, or the file shrank
        }
        return true;
    }

    /// The file through the response's buffer, 64 KiB at a time, each sent before the next is read: for a
    /// connection whose bytes the process must encrypt (TLS), where sendfile(2) cannot go.
    private static bool sendFileBuffered(HandlerFiber f, int fd, ulong offset, ulong length) nothrow @nogc
    {
        import core.sys.posix.unistd : pread;

        enum size_t piece = 64 * 1024;
        auto buf = f.res.buf;
        while (length)
        {
            const want = length < piece ? cast(size_t) length : piece;
            if (!buf.reserve(want))
                return false;
            const n = pread(fd, buf.ptr + buf.len, want, cast(off_t) offset);
            if (n <= 0)
                return false; // the file shrank, or cannot be read
            buf.len += n;
            offset += n;
            length -= n;
            if (!sendFromFiber(cast(void*) f))
                return false;
        }
        return true;
    }

    void await(Job* job)
    {
        job.home = home;
        job.owner = cast(void*) this;
        submit(job);
        Fiber.yield();
    }

    private void loop()
    {
        for (;;)
        {
            runHandler();
            finished = true;
            Fiber.yield();
        }
    }

    private void runHandler()
    {
        try
            handler(req, res, params);
        catch (Exception e)
        {
            logFailure(e);
            res.discard();
            res.send(500, "text/plain", "handler error\n");
        }
    }

    private void logFailure(Exception e) nothrow
    {
        import core.stdc.stdio : fprintf, stderr;

        // one line, straight to the unbuffered stderr (no GC on this path)
        fprintf(stderr, "aurora: handler for %.*s %.*s threw %.*s: %.*s\n",
                cast(int) req.methodText.length, req.methodText.ptr, cast(int) req.path.length, req.path.ptr,
                cast(int) typeid(e).name.length, typeid(e).name.ptr, cast(int) e.msg.length, e.msg.ptr);
    }
}

/// A worker's handler fibers. Every fiber it made stays in `all` (the GC's only sight of a waiting fiber,
/// which the worker's connections, on the C heap, point to): there are as many as the most handlers that
/// ever waited at once.
struct FiberPool
{
    private HandlerFiber idle;
    private HandlerFiber[] all;

    /// An idle fiber (a new one when none is idle).
    HandlerFiber take(Completions* home) nothrow @nogc @trusted
    {
        if (idle is null)
            return (cast(HandlerFiber function(ref FiberPool, Completions*) nothrow @nogc) &grow)(this, home);
        auto f = idle;
        idle = f.nextIdle;
        f.nextIdle = null;
        return f;
    }

    private static HandlerFiber grow(ref FiberPool pool, Completions* home)
    {
        auto f = new HandlerFiber(home);
        pool.all ~= f;
        return f;
    }

    /// `f` has finished its request: keep it for the next.
    void give(HandlerFiber f) nothrow @nogc
    {
        f.conn = null;
        f.handler = null;
        f.nextIdle = idle;
        idle = f;
    }
}

// druntime of LDC 1.30 declares no sendfile(2): glibc's, declared by hand
private extern (C) ssize_t sendfile(int outFd, int inFd, off_t* offset, size_t count) nothrow @nogc;

/// Fiber.yield for @nogc callers (switching stacks allocates nothing).
private void yieldNogc() nothrow @nogc @trusted
{
    static void y() { Fiber.yield(); }
    (cast(void function() nothrow @nogc) &y)();
}

/// Start (`first`) or resume `f` from the @nogc event loop; true when its handler has returned. (The fiber
/// switch allocates nothing; the handler inside may use the GC, which is why it is a fiber handler.)
bool runFiber(HandlerFiber f, bool first) nothrow @nogc @trusted
{
    static bool run(HandlerFiber f, bool first) { return first ? f.start() : f.resume(); }
    return (cast(bool function(HandlerFiber, bool) nothrow @nogc) &run)(f, first);
}

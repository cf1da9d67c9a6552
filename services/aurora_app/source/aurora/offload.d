/**
 * The offload pool: threads that run the blocking work of fiber handlers (a file, a database call, a slow
 * computation) so that the event loop never waits for it.
 *
 *     void report(ref const Request req, ref Response res, ref const Params p)
 *     {
 *         const total = offload(() => sumOfFile(p["name"]));   // the fiber waits; the worker serves others
 *         res.send(200, "text/plain", ...);
 *     }
 *
 * A job is a struct inside the fiber that waits for it, linked into the pool's queue and then into its
 * worker's completion list: submitting and completing a job allocate nothing. An exception thrown by the work
 * is rethrown in the handler.
 */
module aurora.offload;

import core.atomic : atomicLoad, atomicStore;
import core.sync.condition : Condition;
import core.sync.mutex : Mutex;
import core.thread : Fiber, Thread;

/// One piece of blocking work, owned by the fiber that waits for it.
struct Job
{
    void function(void* ctx) run;  // runs `ctx`'s work on a pool thread
    void* ctx;
    Exception error;               // what the work threw
    Completions* home;             // the worker to hand the finished job back to
    void* owner;                   // the waiting fiber (for the worker)
    Job* next;
}

/// A worker's list of finished jobs, and the eventfd that wakes its event loop when one arrives.
struct Completions
{
    import core.sys.posix.pthread : pthread_mutex_t, pthread_mutex_init, pthread_mutex_lock,
        pthread_mutex_unlock;

    private pthread_mutex_t lock;
    private Job* head;
    int eventFd = -1;

    /// Take `fd` (an eventfd the worker polls) as the wake-up.
    void setup(int fd) nothrow @nogc
    {
        pthread_mutex_init(&lock, null);
        eventFd = fd;
    }

    /// From a pool thread: hand `j` back and wake the worker.
    void push(Job* j) nothrow @nogc
    {
        import core.sys.posix.unistd : write;

        pthread_mutex_lock(&lock);
        j.next = head;
        head = j;
        pthread_mutex_unlock(&lock);
        ulong one = 1;
        write(eventFd, &one, one.sizeof);
    }

    /// From the worker: every finished job (the eventfd is drained).
    Job* takeAll() nothrow @nogc
    {
        import core.sys.posix.unistd : read;

        ulong v;
        read(eventFd, &v, v.sizeof);
        pthread_mutex_lock(&lock);
        auto all = head;
        head = null;
        pthread_mutex_unlock(&lock);
        return all;
    }
}

/// What `j`'s work threw (a plain function: the exception outlives the job, which is a local of `offload`).
private Exception errorOf(Job* j) nothrow @nogc { return j.error; }

/// Implemented by the fiber a handler runs in (aurora.task): where a job waits.
interface JobWaiter
{
    /// Submit `job` and yield until a pool thread has run it.
    void await(Job* job);
}

private __gshared Mutex queueLock;
private __gshared Condition queueReady;
private __gshared Job* queueHead, queueTail;
private __gshared Thread[] threads;
private shared bool stopping;

/// Start `n` pool threads (serve calls this once; without it `offload` runs the work in place).
void startOffload(uint n)
{
    queueLock = new Mutex;
    queueReady = new Condition(queueLock);
    atomicStore(stopping, false);
    foreach (i; 0 .. n)
    {
        auto t = new Thread(&poolThread);
        t.isDaemon = true; // a stuck job must not keep the process alive after the drain
        t.start();
        threads ~= t;
    }
}

/// Let the pool threads finish their queue and exit.
void stopOffload()
{
    if (queueLock is null)
        return;
    synchronized (queueLock)
    {
        atomicStore(stopping, true);
        queueReady.notifyAll();
    }
    foreach (t; threads)
        t.join(false);
    threads = null;
    queueLock = null;
}

/// Whether a pool runs (else `offload` runs the work in place).
bool offloadRunning() nothrow @nogc
{
    return queueLock !is null && !atomicLoad(stopping);
}

/// Queue `j` for a pool thread.
void submit(Job* j)
{
    synchronized (queueLock)
    {
        j.next = null;
        if (queueTail)
            queueTail.next = j;
        else
            queueHead = j;
        queueTail = j;
        queueReady.notify();
    }
}

private void poolThread()
{
    for (;;)
    {
        Job* j;
        synchronized (queueLock)
        {
            while (queueHead is null && !atomicLoad(stopping))
                queueReady.wait();
            if (queueHead is null)
                return;
            j = queueHead;
            queueHead = j.next;
            if (queueHead is null)
                queueTail = null;
        }
        try
            j.run(j.ctx);
        catch (Exception e)
            j.error = e;
        j.home.push(j);
    }
}

/**
 * Run `work` on the offload pool and return its result; the calling handler's fiber waits, its worker serves
 * other connections meanwhile. Called outside a handler fiber, or with no pool running, `work` runs in place.
 * An exception thrown by `work` is rethrown here.
 */
T offload(T)(scope T delegate() work) @trusted
{
    static struct Ctx
    {
        T delegate() work;
        static if (!is(T == void))
            T result;
    }

    static void runCtx(void* p)
    {
        auto c = cast(Ctx*) p;
        static if (is(T == void))
            c.work();
        else
            c.result = c.work();
    }

    auto waiter = cast(JobWaiter) Fiber.getThis();
    if (waiter is null || !offloadRunning())
        return work();
    Ctx ctx;
    ctx.work = work;
    Job job;
    job.run = &runCtx;
    job.ctx = &ctx;
    waiter.await(&job); // ctx and job live on this fiber's stack until the worker resumes it
    if (auto e = errorOf(&job))
        throw e;
    static if (!is(T == void))
        return ctx.result;
}

unittest
{   // outside a handler fiber the work runs in place; exceptions pass through
    import std.exception : assertThrown;

    assert(offload(() => 6 * 7) == 42);
    int calls;
    offload(() { calls++; });
    assert(calls == 1);
    assertThrown!Exception(offload(delegate int() { throw new Exception("boom"); }));
}

/**
 * libFuzzer target for the request parser.
 *
 * Build:  ldc2 -g -O1 -fsanitize=fuzzer,address -I source fuzz/parser_fuzz.d \
 *              source/aurora/parser.d -of=parser_fuzz   (plus -L-L<dir of libFuzzer.a> if needed)
 * Run:    ./parser_fuzz -max_total_time=60 fuzz/corpus
 *
 * The first input byte picks the split size; the rest is a byte stream of
 * pipelined requests. The stream is parsed twice, once whole and once fed in
 * pieces, and both runs must produce the same outcomes (statuses, bodies,
 * consumed lengths). Slices must stay inside the buffer, and the limits must hold.
 */
module parser_fuzz;

import aurora.parser;

private struct Outcome
{
    ParseStatus st;
    ushort status;
    size_t consumed;
    size_t bodyLen;
    uint bodyHash;
}

private enum maxOutcomes = 256;
private enum bufSize = 1 << 17;
private __gshared ubyte[bufSize] bufA, bufB;
private __gshared Request reqA, reqB;

private uint hash(const(ubyte)[] b) @nogc nothrow
{
    uint h = 2166136261;
    foreach (x; b)
        h = (h ^ x) * 16777619;
    return h;
}

private Limits fuzzLimits() @nogc nothrow
{
    Limits l;
    l.maxRequestLine = 300;
    l.maxHeaderBytes = 1024;
    l.maxHeaders = 12;
    l.maxBody = 4096;
    l.maxChunkLine = 64;
    return l;
}

/// Parse `input` arriving in pieces of `step` bytes; record every outcome.
private size_t run(const(ubyte)[] input, size_t step, ubyte[] buf, ref Request req,
                   ref Outcome[maxOutcomes] out_) @nogc nothrow
{
    Parser p;
    p.limits = fuzzLimits();
    size_t fed = 0, len = 0, start = 0, n = 0;
    size_t squeezed = 0; // chunk framing removed from the buffer for the current request
    for (;;)
    {
        // feed the next piece (or everything, when step is 0)
        const take = step == 0 ? input.length - fed
                               : (step < input.length - fed ? step : input.length - fed);
        buf[len .. len + take] = input[fed .. fed + take];
        fed += take;
        len += take;
        for (;;)
        {
            if (start == len)
                break;
            size_t avail = len - start;
            const before = avail;
            const st = p.parse(buf.ptr + start, avail, req);
            assert(avail <= before, "parser grew the data");
            len = start + avail;
            squeezed += before - avail;
            if (st == ParseStatus.needMore)
                break;
            Outcome o;
            o.st = st;
            if (st == ParseStatus.error)
            {
                o.status = p.errorStatus;
                assert(o.status == 400 || o.status == 413 || o.status == 414 || o.status == 431
                       || o.status == 501 || o.status == 505, "unexpected status");
                out_[n++] = o;
                return n;
            }
            // done: the request lies inside what was fed, its slices too
            assert(p.consumed > 0 && p.consumed <= avail, "consumed out of range");
            const lo = cast(size_t) buf.ptr + start, hi = lo + p.consumed;
            foreach (ref h; req.headers[0 .. req.headerCount])
                assert(cast(size_t) h.name.ptr >= lo && cast(size_t) h.value.ptr + h.value.length <= hi);
            assert(req.body.length == 0
                   || (cast(size_t) req.body.ptr >= lo && cast(size_t) req.body.ptr + req.body.length <= hi));
            assert(req.body.length <= fuzzLimits().maxBody, "body over the limit");
            assert(!req.hasContentLength || req.body.length == req.contentLength);
            assert(!(req.chunked && req.hasContentLength), "CL and TE both accepted");
            assert(req.headerCount <= fuzzLimits().maxHeaders);
            assert(req.path.length && (req.path[0] == '/' || req.path == "*"));
            foreach (ref h; req.headers[0 .. req.headerCount])
                foreach (c; h.value)
                    assert(c != '\r' && c != '\n' && c != 0);
            o.consumed = p.consumed + squeezed; // bytes of the input stream
            squeezed = 0;
            o.bodyLen = req.body.length;
            o.bodyHash = hash(req.body);
            out_[n++] = o;
            if (n == maxOutcomes)
                return n;
            start += p.consumed;
            p.reset();
        }
        if (fed == input.length)
            break;
    }
    Outcome o;
    o.st = ParseStatus.needMore;
    out_[n++] = o;
    return n;
}

extern (C) int LLVMFuzzerTestOneInput(const(ubyte)* data, size_t size) nothrow @nogc
{
    if (size < 2 || size > bufSize / 2)
        return 0;
    const step = data[0] % 17 + 1;
    const input = data[1 .. size];
    static Outcome[maxOutcomes] whole, split;
    const nw = run(input, 0, bufA[], reqA, whole);
    const ns = run(input, step, bufB[], reqB, split);
    assert(nw == ns, "outcome count differs between whole and split input");
    foreach (i; 0 .. nw)
        assert(whole[i] == split[i], "outcome differs between whole and split input");
    return 0;
}

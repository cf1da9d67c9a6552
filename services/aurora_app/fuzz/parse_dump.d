/**
 * The request parser as a filter, for the differential test against llhttp (tests/test_differential.py):
 * reads cases from stdin, each a 4-byte little-endian length and that many bytes of pipelined requests, and
 * for each writes what the parser framed:
 *
 *     R <method> <target, hex> <body, hex>     one line per complete request
 *     E <status>                               the parser rejected the next request
 *     I                                        the input ends inside a request
 *     D                                        the input ends between requests
 *
 * then a line `--`. Limits are the server's defaults.
 */
module parse_dump;

import core.stdc.stdio;

import aurora.parser;

private __gshared ubyte[1 << 20] buf;

private void hex(const(ubyte)[] b)
{
    static immutable digits = "0123456789abcdef";
    if (b.length == 0)
        putchar('-');
    foreach (x; b)
    {
        putchar(digits[x >> 4]);
        putchar(digits[x & 15]);
    }
}

private void dump(size_t len)
{
    Parser p;
    Request req;
    size_t start = 0;
    for (;;)
    {
        if (start == len)
        {
            puts("D");
            return;
        }
        size_t n = len - start;
        const st = p.parse(buf.ptr + start, n, req);
        len = start + n; // chunked decoding squeezes the tail
        final switch (st)
        {
        case ParseStatus.needMore:
            puts("I");
            return;
        case ParseStatus.error:
            printf("E %d\n", p.errorStatus);
            return;
        case ParseStatus.done:
            printf("R %.*s ", cast(int) req.methodText.length, req.methodText.ptr);
            hex(cast(const(ubyte)[]) req.target);
            putchar(' ');
            hex(req.body);
            putchar('\n');
            start += p.consumed;
            p.reset();
        }
    }
}

int main()
{
    for (;;)
    {
        ubyte[4] l;
        if (fread(l.ptr, 1, 4, stdin) != 4)
            return 0;
        const len = l[0] | l[1] << 8 | l[2] << 16 | cast(size_t) l[3] << 24;
        if (len > buf.length || fread(buf.ptr, 1, len, stdin) != len)
            return 2;
        dump(len);
        puts("--");
        fflush(stdout);
    }
}

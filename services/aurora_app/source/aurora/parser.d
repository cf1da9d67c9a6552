/**
 * Incremental HTTP/1.1 request parser.
 *
 * The parser never copies: the `Request` it fills holds slices into the
 * connection's read buffer. It is resumable: feed it the bytes of the current
 * request (from its first byte to the end of the data read so far) as often as
 * new bytes arrive; it remembers how far it has scanned, so a request that
 * arrives one byte at a time costs linear, not quadratic, time.
 *
 * Line endings: the request line, header lines, chunk-size lines and trailer
 * lines must end with CRLF. A bare LF (an LF not preceded by CR) or a bare CR
 * anywhere in them is rejected with 400 Bad Request. This is stricter than the
 * "MAY accept bare LF" of RFC 9112 §2.2 on purpose: two parsers that disagree on
 * line endings are the raw material of request smuggling.
 *
 * Empty lines (CRLF) before the request line are skipped (RFC 9112 §2.2).
 */
module aurora.parser;

import core.stdc.string : memmove, memchr;

@nogc nothrow {

/// Limits enforced while parsing; each maps to its own status code.
struct Limits
{
    size_t maxRequestLine = 8 * 1024;   /// 414 URI Too Long
    size_t maxHeaderBytes = 16 * 1024;  /// 431 (request line + headers)
    size_t maxHeaders = 64;             /// 431
    size_t maxBody = 1024 * 1024;       /// 413 Content Too Large
    size_t maxChunkLine = 1024;         /// 400 (chunk size + extensions)

    /// What makes these limits unusable, or null.
    string error() const
    {
        if (maxRequestLine < 16 || maxHeaderBytes < maxRequestLine)
            return "--max-request-line must be at least 16 and at most --max-header-bytes";
        if (maxHeaders == 0 || maxHeaders > maxHeaderSlots)
            return "--max-headers must be between 1 and 128";
        if (maxChunkLine < 3)
            return "--max-chunk-line must be at least 3";
        return null;
    }
}

enum maxHeaderSlots = 128;

struct Header
{
    const(char)[] name;
    const(char)[] value;
}

enum Method : ubyte { GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, OTHER }

immutable string[Method.max + 1] methodNames =
    ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "OTHER"];

/// A parsed request: every slice points into the read buffer.
struct Request
{
@nogc nothrow:
    const(char)[] methodText;
    Method method;
    const(char)[] target;   /// request-target as sent
    const(char)[] path;     /// target without the query
    const(char)[] query;    /// after '?', without it
    ubyte minorVersion;     /// HTTP/1.<minor>
    Header[maxHeaderSlots] headers;
    size_t headerCount;
    const(ubyte)[] body;
    bool keepAlive;
    bool chunked;
    bool hasContentLength;
    ulong contentLength;

    const(Header)[] headerList() const return { return headers[0 .. headerCount]; }

    /// The value of the cookie `name` from the Cookie header(s) (RFC 6265 §5.4: `a=1; b=2`), surrounding
    /// double quotes removed; null when there is none.
    const(char)[] cookie(const(char)[] name) const
    {
        foreach (ref h; headers[0 .. headerCount])
        {
            if (!ieq(h.name, "cookie"))
                continue;
            const(char)[] rest = h.value;
            while (rest.length)
            {
                size_t end = 0;
                while (end < rest.length && rest[end] != ';')
                    end++;
                const pair = trim(rest[0 .. end]);
                rest = end < rest.length ? rest[end + 1 .. $] : null;
                size_t eq = 0;
                while (eq < pair.length && pair[eq] != '=')
                    eq++;
                if (eq == pair.length || trim(pair[0 .. eq]) != name)
                    continue;
                auto v = trim(pair[eq + 1 .. $]);
                if (v.length >= 2 && v[0] == '"' && v[$ - 1] == '"')
                    v = v[1 .. $ - 1];
                return v;
            }
        }
        return null;
    }

    /// `src` copied (its header slots in use only): the slices still point where `src`'s do.
    void copyFrom(ref const Request src)
    {
        methodText = src.methodText;
        method = src.method;
        target = src.target;
        path = src.path;
        query = src.query;
        minorVersion = src.minorVersion;
        headerCount = src.headerCount;
        headers[0 .. headerCount] = src.headers[0 .. headerCount];
        body = src.body;
        keepAlive = src.keepAlive;
        chunked = src.chunked;
        hasContentLength = src.hasContentLength;
        contentLength = src.contentLength;
    }

    /// Point every slice that lies in `[from, from + len)` to the same offset from `to` (the request's
    /// bytes were moved there).
    void rebase(const(void)* from, size_t len, const(void)* to)
    {
        methodText = moved(methodText, from, len, to);
        target = moved(target, from, len, to);
        path = moved(path, from, len, to);
        query = moved(query, from, len, to);
        foreach (ref h; headers[0 .. headerCount])
        {
            h.name = moved(h.name, from, len, to);
            h.value = moved(h.value, from, len, to);
        }
        body = moved(body, from, len, to);
    }

    /// First header with that name (case-insensitive), or null.
    const(char)[] header(const(char)[] name) const
    {
        foreach (ref h; headers[0 .. headerCount])
            if (ieq(h.name, name))
                return h.value;
        return null;
    }
}

/// `s` moved by `to - from` when it lies in `[from, from + len)` (bytes moved elsewhere), else `s`.
T[] moved(T)(T[] s, const(void)* from, size_t len, const(void)* to)
{
    const p = cast(const(ubyte)*) s.ptr, f = cast(const(ubyte)*) from;
    if (s.length == 0 || p < f || p >= f + len)
        return s;
    return cast(T[]) (cast(const(ubyte)*) to)[p - f .. p - f + s.length];
}

enum ParseStatus : ubyte
{
    needMore,   /// the request is not complete yet
    done,       /// `consumed` bytes form one complete request
    error,      /// reject with `errorStatus`, then close the connection
}

private enum Phase : ubyte { head, body, chunkSize, chunkData, chunkDataEnd, trailers }

struct Parser
{
@nogc nothrow:
    Limits limits;

    private Phase phase;
    private size_t scan;        // next byte to look at in the head
    private size_t lineStart;   // start of the current line in the head
    private size_t reqLine;     // offset of the request line (after leading CRLFs)
    private size_t lines;       // lines seen (request line included)
    private size_t headerEnd;   // offset just after the blank line
    // chunked decoding (offsets from the request start)
    private size_t rpos;        // next raw byte to decode
    private size_t wpos;        // end of the decoded body
    private ulong chunkLeft;    // bytes left in the current chunk
    private size_t trailerBytes;
    private size_t bodyLen;     // Content-Length

    ushort errorStatus;         /// set when parse returns `error`
    const(char)[] errorReason;  /// short text for the error body
    size_t consumed;            /// set when parse returns `done`
    bool expectContinue;        /// head complete, body pending, an HTTP/1.1 client sent Expect: 100-continue

    /// True once the blank line ending the header section has been seen.
    bool headComplete() const { return phase != Phase.head; }

    /// Forget everything about the previous request.
    void reset()
    {
        auto l = limits;
        this = Parser.init;
        limits = l;
    }

    /**
     * Parse the request that starts at `base`. `len` is the number of bytes
     * available from `base`; when decoding a chunked body the parser moves the
     * not-yet-decoded bytes down over the chunk framing it has removed and
     * lowers `len` accordingly (the caller must update its buffer length).
     */
    ParseStatus parse(ubyte* base, ref size_t len, ref Request req)
    {
        bool fresh = false;
        if (phase == Phase.head)
        {
            fresh = true;
            auto st = scanHead(base, len);
            if (st != ParseStatus.done)
                return st;
            st = parseHead(cast(const(char)*) base, req);
            if (st != ParseStatus.done)
                return st;
            if (req.chunked)
            {
                phase = Phase.chunkSize;
                rpos = wpos = headerEnd;
            }
            else
                phase = Phase.body;
            bodyLen = cast(size_t) req.contentLength;
        }
        if (phase == Phase.body)
        {
            const need = headerEnd + bodyLen;
            if (len < need)
                return ParseStatus.needMore;
            // `req` may have been used for other connections meanwhile
            if (!fresh)
                parseHead(cast(const(char)*) base, req);
            req.body = base[headerEnd .. need];
            consumed = need;
            return ParseStatus.done;
        }
        auto st = decodeChunked(base, len);
        if (st == ParseStatus.done)
        {
            if (!fresh)
                parseHead(cast(const(char)*) base, req);
            req.body = base[headerEnd .. wpos];
            consumed = rpos;
        }
        else if (st == ParseStatus.needMore && rpos > wpos)
        {
            // squeeze out the framing already decoded so the buffer only ever
            // holds head + decoded body + the undecoded tail
            memmove(base + wpos, base + rpos, len - rpos);
            len -= rpos - wpos;
            rpos = wpos;
        }
        return st;
    }

private:
    ParseStatus fail(ushort status, string reason)
    {
        errorStatus = status;
        errorReason = reason;
        return ParseStatus.error;
    }

    /// Find the end of the header section, checking line endings and limits.
    ParseStatus scanHead(const(ubyte)* base, size_t len)
    {
        while (scan < len)
        {
            auto p = cast(const(ubyte)*) memchr(base + scan, '\n', len - scan);
            const end = p is null ? len : cast(size_t)(p - base);
            if (lines == 0 && end - lineStart > limits.maxRequestLine + 1)
                return fail(414, "request line too long");
            if (end > limits.maxHeaderBytes)
                return fail(lines == 0 ? 414 : 431,
                            lines == 0 ? "request line too long" : "header section too large");
            if (p is null)
            {
                scan = len;
                return ParseStatus.needMore;
            }
            if (end == lineStart || base[end - 1] != '\r')
                return fail(400, "bare LF in header section");
            const lineLen = end - 1 - lineStart;
            scan = end + 1;
            if (lineLen == 0)
            {
                if (lines == 0)
                {   // empty line(s) before the request line: skip
                    lineStart = reqLine = scan;
                    continue;
                }
                headerEnd = scan;
                phase = Phase.body; // provisional; parseHead decides
                return ParseStatus.done;
            }
            if (lines > limits.maxHeaders)
                return fail(431, "too many header fields");
            lines++;
            lineStart = scan;
        }
        return ParseStatus.needMore;
    }

    ParseStatus parseHead(const(char)* base, ref Request req)
    {
        req.headerCount = 0;
        req.body = null;
        req.chunked = false;
        req.hasContentLength = false;
        req.contentLength = 0;

        // ---- request line: method SP request-target SP HTTP-version CRLF
        const(char)[] line = lineAt(base, reqLine);
        size_t pos = reqLine + line.length + 2;

        size_t i = 0;
        while (i < line.length && isTchar(line[i]))
            i++;
        if (i == 0 || i >= line.length || line[i] != ' ')
            return fail(400, "malformed request line");
        req.methodText = line[0 .. i];
        req.method = methodOf(req.methodText);
        const tStart = ++i;
        while (i < line.length && line[i] != ' ')
        {
            const c = cast(ubyte) line[i];
            if (c <= 0x20 || c == 0x7f)
                return fail(400, "invalid character in request target");
            i++;
        }
        if (i == tStart || i >= line.length)
            return fail(400, "malformed request line");
        req.target = line[tStart .. i];
        const ver = line[i + 1 .. $];
        if (ver.length != 8 || ver[0 .. 5] != "HTTP/" || !isDigit(ver[5]) || ver[6] != '.'
                || !isDigit(ver[7]))
            return fail(400, "malformed HTTP version");
        if (ver[5] != '1')
            return fail(505, "HTTP version not supported");
        req.minorVersion = cast(ubyte)(ver[7] - '0');
        if (req.target[0] == '/' || isAbsoluteForm(req.target))
        {
            // origin-form, or absolute-form (RFC 9112 §3.2.2): route on its path
            size_t p0 = 0;
            if (req.target[0] != '/')
            {
                p0 = lower(req.target[4]) == 's' ? 8 : 7;
                while (p0 < req.target.length && req.target[p0] != '/' && req.target[p0] != '?')
                    p0++;
            }
            size_t q = p0;
            while (q < req.target.length && req.target[q] != '?')
                q++;
            req.path = q > p0 ? req.target[p0 .. q] : "/";
            req.query = q < req.target.length ? req.target[q + 1 .. $] : null;
        }
        else if (req.target == "*" && req.method == Method.OPTIONS)
        {
            req.path = req.target;
            req.query = null;
        }
        else
            return fail(400, "unsupported request target form");

        // ---- header fields
        bool keepAlive = req.minorVersion >= 1;
        bool sawTE, sawHost;
        int hosts;
        while (pos < headerEnd - 2)
        {
            line = lineAt(base, pos);
            pos += line.length + 2;
            if (line[0] == ' ' || line[0] == '\t')
                return fail(400, "obsolete line folding");
            size_t c = 0;
            while (c < line.length && isTchar(line[c]))
                c++;
            if (c == 0 || c >= line.length || line[c] != ':')
                return fail(400, "malformed header field");
            const name = line[0 .. c];
            size_t vs = c + 1, ve = line.length;
            while (vs < ve && (line[vs] == ' ' || line[vs] == '\t'))
                vs++;
            while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
                ve--;
            const value = line[vs .. ve];
            foreach (ch; value)
            {
                const u = cast(ubyte) ch;
                if ((u < 0x20 && u != '\t') || u == 0x7f)
                    return fail(400, "invalid character in header value");
            }
            if (req.headerCount == maxHeaderSlots)
                return fail(431, "too many header fields");
            req.headers[req.headerCount++] = Header(name, value);

            if (ieq(name, "content-length"))
            {
                ulong n;
                if (!parseContentLength(value, n))
                    return fail(400, "invalid Content-Length");
                if (req.hasContentLength && n != req.contentLength)
                    return fail(400, "conflicting Content-Length");
                req.hasContentLength = true;
                req.contentLength = n;
            }
            else if (ieq(name, "transfer-encoding"))
            {
                if (sawTE)
                    return fail(400, "repeated Transfer-Encoding");
                sawTE = true;
                const r = checkTransferEncoding(value);
                if (r != 0)
                    return fail(r, r == 501 ? "transfer coding not implemented"
                                            : "invalid Transfer-Encoding");
                req.chunked = true;
            }
            else if (ieq(name, "connection"))
            {
                if (hasToken(value, "close"))
                    keepAlive = false;
                else if (hasToken(value, "keep-alive"))
                    keepAlive = true;
            }
            else if (ieq(name, "host"))
                hosts++;
            else if (ieq(name, "expect") && ieq(value, "100-continue") && req.minorVersion >= 1)
                expectContinue = true; // RFC 9110 §10.1.1: ignored from HTTP/1.0 clients
        }
        if (sawTE && req.hasContentLength)
            return fail(400, "both Content-Length and Transfer-Encoding");
        if (sawTE && req.minorVersion == 0)
            return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
        if (req.minorVersion >= 1 && hosts != 1)
            return fail(400, hosts == 0 ? "missing Host header" : "repeated Host header");
        if (req.hasContentLength && req.contentLength > limits.maxBody)
            return fail(413, "request body too large");
        req.keepAlive = keepAlive;
        return ParseStatus.done;
    }

    ParseStatus decodeChunked(ubyte* base, size_t len)
    {
        for (;;)
        {
            final switch (phase)
            {
            case Phase.head:
            case Phase.body:
                assert(0);
            case Phase.chunkSize:
            {
                auto p = cast(ubyte*) memchr(base + rpos, '\n', len - rpos);
                if (p is null)
                {
                    if (len - rpos > limits.maxChunkLine)
                        return fail(400, "chunk size line too long");
                    return ParseStatus.needMore;
                }
                const end = cast(size_t)(p - base);
                if (end - rpos > limits.maxChunkLine)
                    return fail(400, "chunk size line too long");
                if (end == rpos || base[end - 1] != '\r')
                    return fail(400, "bare LF in chunked framing");
                const line = cast(const(char)[]) base[rpos .. end - 1];
                size_t i = 0;
                ulong size = 0;
                while (i < line.length && hexVal(line[i]) >= 0)
                {
                    if (i >= 15)
                        return fail(400, "chunk size too long");
                    size = size * 16 + hexVal(line[i]);
                    i++;
                }
                if (i == 0)
                    return fail(400, "invalid chunk size");
                // chunk extensions: BWS ";" ... (ignored, but no control bytes)
                size_t j = i;
                while (j < line.length && (line[j] == ' ' || line[j] == '\t'))
                    j++;
                if (j < line.length && line[j] != ';')
                    return fail(400, "invalid chunk size");
                foreach (ch; line[j .. $])
                {
                    const u = cast(ubyte) ch;
                    if ((u < 0x20 && u != '\t') || u == 0x7f)
                        return fail(400, "invalid chunk extension");
                }
                rpos = end + 1;
                if (size == 0)
                {
                    phase = Phase.trailers;
                    break;
                }
                if (wpos - headerEnd + size > limits.maxBody)
                    return fail(413, "request body too large");
                chunkLeft = size;
                phase = Phase.chunkData;
                break;
            }
            case Phase.chunkData:
            {
                const avail = len - rpos;
                if (avail == 0)
                    return ParseStatus.needMore;
                const n = avail < chunkLeft ? avail : cast(size_t) chunkLeft;
                if (wpos != rpos)
                    memmove(base + wpos, base + rpos, n);
                wpos += n;
                rpos += n;
                chunkLeft -= n;
                if (chunkLeft == 0)
                    phase = Phase.chunkDataEnd;
                break;
            }
            case Phase.chunkDataEnd:
                if (len - rpos < 2)
                {
                    if (len - rpos == 1 && base[rpos] != '\r')
                        return fail(400, "chunk data not followed by CRLF");
                    return ParseStatus.needMore;
                }
                if (base[rpos] != '\r' || base[rpos + 1] != '\n')
                    return fail(400, "chunk data not followed by CRLF");
                rpos += 2;
                phase = Phase.chunkSize;
                break;
            case Phase.trailers:
            {
                auto p = cast(ubyte*) memchr(base + rpos, '\n', len - rpos);
                if (p is null)
                {
                    if (trailerBytes + (len - rpos) > limits.maxHeaderBytes)
                        return fail(431, "trailer section too large");
                    return ParseStatus.needMore;
                }
                const end = cast(size_t)(p - base);
                if (trailerBytes + (end + 1 - rpos) > limits.maxHeaderBytes)
                    return fail(431, "trailer section too large");
                if (end == rpos || base[end - 1] != '\r')
                    return fail(400, "bare LF in trailer section");
                const lineLen = end - 1 - rpos;
                trailerBytes += lineLen + 2;
                if (lineLen > 0)
                {
                    const c0 = base[rpos];
                    if (c0 == ' ' || c0 == '\t')
                        return fail(400, "obsolete line folding");
                    size_t c = rpos;
                    while (c < end - 1 && isTchar(cast(char) base[c]))
                        c++;
                    if (c == rpos || base[c] != ':')
                        return fail(400, "malformed trailer field");
                    foreach (u; base[c .. end - 1])
                        if ((u < 0x20 && u != '\t') || u == 0x7f)
                            return fail(400, "invalid character in trailer");
                }
                rpos = end + 1;
                if (lineLen == 0)
                    return ParseStatus.done;
                break;
            }
            }
        }
    }

    /// The line starting at `start` (its CRLF excluded); the head is complete.
    static const(char)[] lineAt(const(char)* base, size_t start)
    {
        size_t e = start;
        while (base[e] != '\r' || base[e + 1] != '\n')
        {
            e++;
        }
        return base[start .. e];
    }
}

// ---------------------------------------------------------------- helpers

/// "http://x..." or "https://x..." (scheme case-insensitive, non-empty authority).
bool isAbsoluteForm(const(char)[] t) pure
{
    if (t.length > 7 && ieq(t[0 .. 7], "http://"))
        return t[7] != '/';
    if (t.length > 8 && ieq(t[0 .. 8], "https://"))
        return t[8] != '/';
    return false;
}

bool isDigit(char c) pure { return c >= '0' && c <= '9'; }

int hexVal(char c) pure
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

private immutable bool[256] tcharTable = () {
    bool[256] t;
    foreach (c; '0' .. '9' + 1) t[c] = true;
    foreach (c; 'a' .. 'z' + 1) t[c] = true;
    foreach (c; 'A' .. 'Z' + 1) t[c] = true;
    foreach (c; "!#$%&'*+-.^_`|~") t[c] = true;
    return t;
}();

/// RFC 9110 token character.
bool isTchar(char c) pure { return tcharTable[cast(ubyte) c]; }

char lower(char c) pure { return (c >= 'A' && c <= 'Z') ? cast(char)(c + 32) : c; }

/// ASCII case-insensitive equality.
bool ieq(const(char)[] a, const(char)[] b) pure
{
    if (a.length != b.length)
        return false;
    foreach (i; 0 .. a.length)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

Method methodOf(const(char)[] m) pure
{
    switch (m)
    {
    case "GET": return Method.GET;
    case "HEAD": return Method.HEAD;
    case "POST": return Method.POST;
    case "PUT": return Method.PUT;
    case "DELETE": return Method.DELETE;
    case "PATCH": return Method.PATCH;
    case "OPTIONS": return Method.OPTIONS;
    default: return Method.OTHER;
    }
}

/// Content-Length: 1*DIGIT, or a list of identical values ("5, 5").
bool parseContentLength(const(char)[] v, out ulong result) pure
{
    bool have = false;
    size_t i = 0;
    for (;;)
    {
        while (i < v.length && (v[i] == ' ' || v[i] == '\t'))
            i++;
        size_t s = i;
        ulong n = 0;
        while (i < v.length && isDigit(v[i]))
        {
            if (i - s >= 18)
                return false;
            n = n * 10 + (v[i] - '0');
            i++;
        }
        if (i == s)
            return false;
        if (have && n != result)
            return false;
        result = n;
        have = true;
        while (i < v.length && (v[i] == ' ' || v[i] == '\t'))
            i++;
        if (i == v.length)
            return true;
        if (v[i] != ',')
            return false;
        i++;
    }
}

/// 0 if the codings end with a single "chunked"; 400 if chunked is missing,
/// not last or repeated; 501 for other codings before it.
ushort checkTransferEncoding(const(char)[] v) pure
{
    size_t count, chunkedAt = size_t.max;
    bool other;
    size_t i = 0;
    while (i <= v.length)
    {
        size_t s = i;
        while (i < v.length && v[i] != ',')
            i++;
        auto t = trim(v[s .. i]);
        // drop transfer-parameters
        size_t semi = 0;
        while (semi < t.length && t[semi] != ';')
            semi++;
        t = trim(t[0 .. semi]);
        if (t.length)
        {
            if (ieq(t, "chunked"))
            {
                if (chunkedAt != size_t.max)
                    return 400;
                chunkedAt = count;
            }
            else
                other = true;
            count++;
        }
        i++;
    }
    if (count == 0 || chunkedAt != count - 1)
        return 400;
    return other ? 501 : 0;
}

const(char)[] trim(const(char)[] s) pure
{
    size_t a = 0, b = s.length;
    while (a < b && (s[a] == ' ' || s[a] == '\t')) a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) b--;
    return s[a .. b];
}

/// Whether a comma-separated header value holds `tok` (case-insensitive).
bool hasToken(const(char)[] v, const(char)[] tok) pure
{
    size_t i = 0;
    while (i <= v.length)
    {
        size_t s = i;
        while (i < v.length && v[i] != ',')
            i++;
        if (ieq(trim(v[s .. i]), tok))
            return true;
        i++;
    }
    return false;
}

} // @nogc nothrow

// ---------------------------------------------------------------- unittests

version (unittest)
{
    private struct Fed
    {
        ParseStatus st;
        ushort status;
        size_t consumed;
    }

    /// Feed `input` in pieces of `step` bytes into a growing buffer.
    private Fed feed(ref Request req, const(char)[] input, size_t step = size_t.max,
                     Limits lim = Limits.init)
    {
        static ubyte[1 << 20] buf;
        Parser p;
        p.limits = lim;
        size_t have = 0, len = 0;
        ParseStatus st = ParseStatus.needMore;
        while (have < input.length)
        {
            const n = step < input.length - have ? step : input.length - have;
            buf[len .. len + n] = cast(const(ubyte)[]) input[have .. have + n];
            have += n;
            len += n;
            st = p.parse(buf.ptr, len, req);
            if (st != ParseStatus.needMore)
                break;
        }
        return Fed(st, p.errorStatus, p.consumed);
    }
}

unittest
{
    Request r;
    auto f = feed(r, "GET /plaintext?x=1 HTTP/1.1\r\nHost: a\r\nX-Y:  z \r\n\r\n");
    assert(f.st == ParseStatus.done);
    assert(r.method == Method.GET && r.path == "/plaintext" && r.query == "x=1");
    assert(r.header("x-y") == "z" && r.header("HOST") == "a");
    assert(r.keepAlive && r.minorVersion == 1 && r.body.length == 0);
}

unittest
{   // every split point gives the same result
    enum req = "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET";
    foreach (step; 1 .. req.length + 1)
    {
        Request r;
        auto f = feed(r, req, step);
        assert(f.st == ParseStatus.done);
        assert(cast(const(char)[]) r.body == "hello");
        assert(f.consumed == req.length - 3);
    }
}

unittest
{   // chunked body, split at every byte, with extensions and trailers
    enum req = "POST /e HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        ~ "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
    foreach (step; 1 .. req.length + 1)
    {
        Request r;
        auto f = feed(r, req, step);
        assert(f.st == ParseStatus.done);
        assert(cast(const(char)[]) r.body == "hello 0123456789");
        assert(r.chunked);
    }
}

unittest
{   // rejections and their statuses
    static struct Case { string input; ushort status; }
    immutable Case[] cases = [
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET / HTTP/1.1\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHo\rst: a\r\n\r\n", 400},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        {"GET / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400},
        {"GET / FOO/1.1\r\nHost: a\r\n\r\n", 400},
        {"GET x HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n", 400},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n", 413},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n", 400},
    ];
    foreach (c; cases)
    {
        foreach (step; [1, 3, 1000])
        {
            Request r;
            auto f = feed(r, c.input, step);
            assert(f.st == ParseStatus.error, c.input);
            assert(f.status == c.status, c.input);
        }
    }
}

unittest
{   // limits: request line 414, header bytes / count 431
    Limits lim;
    lim.maxRequestLine = 64;
    lim.maxHeaderBytes = 256;
    lim.maxHeaders = 4;
    char[600] big = 'a';
    Request r;
    auto f = feed(r, "GET /" ~ big[0 .. 100].idup ~ " HTTP/1.1\r\n", 7, lim);
    assert(f.st == ParseStatus.error && f.status == 414);
    f = feed(r, "GET / HTTP/1.1\r\nX: " ~ big[0 .. 300].idup, 7, lim);
    assert(f.st == ParseStatus.error && f.status == 431);
    f = feed(r, "GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\n\r\n", 7, lim);
    assert(f.st == ParseStatus.error && f.status == 431);
    // no CRLF at all within the limit: still 414
    f = feed(r, big[0 .. 300].idup, 1000, lim);
    assert(f.st == ParseStatus.error && f.status == 414);
}

unittest
{   // connection semantics, leading empty lines, HTTP/1.0
    Request r;
    auto f = feed(r, "\r\nGET / HTTP/1.0\r\n\r\n");
    assert(f.st == ParseStatus.done && !r.keepAlive && r.minorVersion == 0);
    f = feed(r, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert(f.st == ParseStatus.done && r.keepAlive);
    f = feed(r, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert(f.st == ParseStatus.done && !r.keepAlive);
    f = feed(r, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc");
    assert(f.st == ParseStatus.done && r.body.length == 3);
    f = feed(r, "GET / HTTP/1.1\r\nHost: a\r\n");
    assert(f.st == ParseStatus.needMore);
    // absolute-form targets route on their path
    f = feed(r, "GET http://example.com/json?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert(f.st == ParseStatus.done && r.path == "/json" && r.query == "x=1");
    f = feed(r, "GET HTTPS://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert(f.st == ParseStatus.done && r.path == "/" && r.query is null);
    f = feed(r, "GET http:/// HTTP/1.1\r\nHost: a\r\n\r\n");
    assert(f.st == ParseStatus.error && f.status == 400);
}

unittest
{   // Expect: 100-continue counts from HTTP/1.1 clients only (RFC 9110 §10.1.1)
    static ubyte[256] buf;
    foreach (minor, want; [false, true])
    {
        Parser p;
        Request r;
        const text = minor ? "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
                           : "POST / HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
        buf[0 .. text.length] = cast(const(ubyte)[]) text;
        size_t len = text.length;
        assert(p.parse(buf.ptr, len, r) == ParseStatus.needMore);
        assert(p.headComplete && p.expectContinue == want);
    }
}

unittest
{   // a copy rebased onto moved bytes reads the same request
    char[64] a, b;
    const text = "GET /p?q=1 HTTP/1.1\r\nHost: h\r\nX: y\r\n\r\n";
    a[0 .. text.length] = text;
    Parser p;
    Request r, c;
    size_t len = text.length;
    assert(p.parse(cast(ubyte*) a.ptr, len, r) == ParseStatus.done);
    c.copyFrom(r);
    b[] = a[];
    a[] = 'z';
    c.rebase(a.ptr, a.length, b.ptr);
    assert(c.methodText == "GET" && c.path == "/p" && c.query == "q=1" && c.header("x") == "y");
    assert(c.headerCount == 2 && c.keepAlive);
}

unittest
{   // cookies from one or more Cookie headers
    char[128] a;
    const text = "GET / HTTP/1.1\r\nHost: h\r\nCookie: a=1; sid=\"xyz\" ;flag\r\nCookie: b=2; a=3\r\n\r\n";
    a[0 .. text.length] = text;
    Parser p;
    Request r;
    size_t len = text.length;
    assert(p.parse(cast(ubyte*) a.ptr, len, r) == ParseStatus.done);
    assert(r.cookie("a") == "1" && r.cookie("sid") == "xyz" && r.cookie("b") == "2");
    assert(r.cookie("flag") is null && r.cookie("missing") is null && r.cookie("") is null);
}

/**
 * Output buffer and response builder.
 *
 * Responses are written straight into the connection's write buffer: the
 * status line comes from a table built at compile time, the Date line from
 * the per-thread cache, and the body is appended in place. Small bodies known
 * up front take the direct path (`send`); generated bodies are streamed into
 * the buffer (`begin` / `put...` / `finish`) and their Content-Length is
 * patched in afterwards.
 *
 * A handler that misuses the builder (`send` or `begin` twice, `begin`
 * without `finish`, `put` outside `begin`/`finish`) does not get a broken
 * response on the wire: the builder marks itself `misused` and ignores the
 * rest, and the server replaces whatever it wrote with one clean 500.
 */
module aurora.response;

import core.stdc.stdlib : realloc, free;
import core.stdc.string : memcpy, memmove;
import aurora.date : dateLine;

/// The status line and Server header of every code 100..599 for the server name `name`
/// ("HTTP/1.1 200 OK\r\nServer: aurora\r\n"); an empty name sends no Server header.
private string[500] statusTable(string name) pure
{
    string[500] t;
    const server = name.length ? "Server: " ~ name ~ "\r\n" : "";
    foreach (code; 100 .. 600)
    {
        char[3] d = [cast(char)('0' + code / 100), cast(char)('0' + code / 10 % 10),
                     cast(char)('0' + code % 10)];
        t[code - 100] = "HTTP/1.1 " ~ d.idup ~ " " ~ reasonPhrase(code) ~ "\r\n" ~ server;
    }
    return t;
}

/// Use `name` in the Server header from now on; call before the workers start. False when `name` is not a
/// valid field value.
bool setServerName(string name)
{
    if (!validFieldValue(name))
        return false;
    immutable table = statusTable(name);
    statusLines = table.idup;
    return true;
}

private immutable string[500] defaultStatusLines = statusTable(defaultServerName);
// the table in use: set once by setServerName before the workers start, read-only after
private __gshared immutable(string)[] statusLines = defaultStatusLines[];

/// The Server header value of every response (ServerConfig.serverName); "" sends none.
enum defaultServerName = "aurora";

@nogc nothrow:

/// A growable byte buffer on the C heap (never the GC heap).
struct Buffer
{
@nogc nothrow:
    ubyte* ptr;
    size_t len;
    size_t cap;
    bool failed;   /// an allocation failed; the contents are incomplete

    @disable this(this);

    /// Make room for `extra` more bytes.
    bool reserve(size_t extra)
    {
        if (len + extra <= cap)
            return true;
        size_t n = cap ? cap * 2 : 4096;
        while (n < len + extra)
            n *= 2;
        auto p = cast(ubyte*) realloc(ptr, n);
        if (p is null)
        {
            failed = true;
            return false;
        }
        ptr = p;
        cap = n;
        return true;
    }

    /// When empty, give back the capacity above `keep` bytes (0: all of it).
    void shrink(size_t keep)
    {
        if (len != 0 || cap <= keep)
            return;
        if (keep)
        {
            auto p = cast(ubyte*) realloc(ptr, keep);
            if (p !is null)
            {
                ptr = p;
                cap = keep;
                return;
            }
        }
        free(ptr);
        ptr = null;
        cap = 0;
    }

    void release()
    {
        free(ptr);
        ptr = null;
        len = cap = 0;
    }

    void put(const(void)[] s)
    {
        if (!reserve(s.length))
            return;
        memcpy(ptr + len, s.ptr, s.length);
        len += s.length;
    }

    void putChar(char c)
    {
        if (!reserve(1))
            return;
        ptr[len++] = c;
    }

    void putUint(ulong v)
    {
        char[20] tmp;
        put(formatUint(v, tmp));
    }

    void putInt(long v)
    {
        if (v < 0)
        {
            putChar('-');
            putUint(cast(ulong)(-(v + 1)) + 1);
        }
        else
            putUint(v);
    }

    const(ubyte)[] data() const return { return ptr[0 .. len]; }
}

/// Decimal digits of `v`, written at the end of `tmp`.
const(char)[] formatUint(ulong v, return ref char[20] tmp) pure
{
    size_t i = tmp.length;
    do
    {
        tmp[--i] = cast(char)('0' + v % 10);
        v /= 10;
    }
    while (v);
    return tmp[i .. $];
}

string reasonPhrase(int code) pure
{
    switch (code)
    {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

string statusLine(int code)
{
    if (code < 100 || code > 599)
        code = 500;
    return statusLines[code - 100];
}

private enum clWidth = 10; // room reserved for a streamed Content-Length

/// A header field value (RFC 9110 §5.5): visible characters, spaces and tabs; no CR, LF, NUL or DEL.
bool validFieldValue(const(char)[] v) @nogc nothrow pure
{
    foreach (char c; v)
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    return true;
}

/// A token character of a header name (RFC 9110 §5.6.2).
private bool tokenChar(char c) @nogc nothrow pure
{
    import std.ascii : isAlphaNum;

    switch (c)
    {
    case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
        return true;
    default:
        return isAlphaNum(c);
    }
}

/// Zero or more "Name: value\r\n" lines, each name a token and each value a valid field value.
bool validHeaderLines(const(char)[] lines) @nogc nothrow pure
{
    size_t i = 0;
    while (i < lines.length)
    {
        size_t colon = i;
        while (colon < lines.length && tokenChar(lines[colon]))
            colon++;
        if (colon == i || colon >= lines.length || lines[colon] != ':')
            return false;
        size_t end = colon + 1;
        while (end < lines.length && lines[end] != '\r' && lines[end] != '\n')
            end++;
        if (end + 1 >= lines.length || lines[end] != '\r' || lines[end + 1] != '\n')
            return false;
        if (!validFieldValue(lines[colon + 1 .. end]))
            return false;
        i = end + 2;
    }
    return true;
}

/// Header lines added with `Response.header`/`setCookie` (by middleware or the handler) before the
/// status line is written: a room of its own, so that they can come before `begin`/`send`.
struct HeaderBag
{
@nogc nothrow:
    enum size_t capacity = 2048;
    private char[capacity] room = void;
    size_t len;

    const(char)[] lines() const return { return room[0 .. len]; }

    void copyFrom(ref const HeaderBag other)
    {
        len = other.len;
        room[0 .. len] = other.room[0 .. len];
    }

    /// Append `name: value\r\n`; false (nothing appended) when it does not fit.
    private bool add(const(char)[] name, const(char)[] value)
    {
        if (len + name.length + value.length + 4 > capacity)
            return false;
        const(char)[][4] parts = [name, ": ", value, "\r\n"];
        foreach (part; parts)
        {
            room[len .. len + part.length] = part[];
            len += part.length;
        }
        return true;
    }
}

/// cookie-octet* of RFC 6265 §4.1.1 (optionally in double quotes).
private bool cookieOctets(const(char)[] v) @nogc nothrow pure
{
    if (v.length >= 2 && v[0] == '"' && v[$ - 1] == '"')
        v = v[1 .. $ - 1];
    foreach (char c; v)
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\')
            return false;
    return true;
}

/// A cookie attribute value: visible characters but ';'.
private bool attrValue(const(char)[] v) @nogc nothrow pure
{
    foreach (char c; v)
        if (c < 0x20 || c >= 0x7f || c == ';')
            return false;
    return true;
}

/// A header name: a non-empty token (RFC 9110 §5.1).
bool validFieldName(const(char)[] n) @nogc nothrow pure
{
    if (n.length == 0)
        return false;
    foreach (char c; n)
        if (!tokenChar(c))
            return false;
    return true;
}

/// Options of a Set-Cookie header (RFC 6265 §4.1).
struct CookieOptions
{
    const(char)[] path;        /// Path=
    const(char)[] domain;      /// Domain=
    long maxAge = long.min;    /// Max-Age= (seconds; long.min: none, a session cookie)
    bool secure;               /// Secure
    bool httpOnly;             /// HttpOnly
    const(char)[] sameSite;    /// SameSite= (Strict, Lax or None)
}

/// Builds one response into a connection's write buffer.
struct Response
{
@nogc nothrow:
    Buffer* buf;
    bool headOnly;      /// HEAD request: headers only, Content-Length of the GET
    bool keepAlive;     /// false: add "Connection: close"
    bool announceKeepAlive; /// HTTP/1.0 keep-alive: add "Connection: keep-alive"
    ushort status;
    bool done;          /// a whole response was written (send, or begin ... finish)
    bool misused;       /// the handler broke the protocol of the builder; output since `start` is void

    HeaderBag* bag;     /// header lines added before the status line (null: `header` is refused)
    /// Set by the fiber a handler runs in: sends what is buffered and waits for the socket to take it; false
    /// when the client is gone. (Inline handlers have none: their output goes out after they return.)
    bool function(void* ctx) @nogc nothrow sendHook;
    /// Set by the fiber too: sends the response so far, then `length` bytes of `fd` from `offset` (sendfile).
    bool function(void* ctx, int fd, ulong offset, ulong length) @nogc nothrow fileHook;
    void* sendCtx;
    bool committed;     /// part of this response has been written to the socket: it can no longer be replaced

    private bool streaming;  // between begin and finish
    private bool chunked;    // begun with beginChunked
    private bool http10;     // the request was HTTP/1.0: no chunked coding, the body ends with the connection
    private size_t chunkStart; // where the current chunk's size placeholder is
    private size_t start;    // buf.len when this response began
    private size_t clPos;
    private size_t bodyStart;

    this(Buffer* b, bool head, bool keep, bool announceKeep = false)
    {
        buf = b;
        headOnly = head;
        keepAlive = keep;
        announceKeepAlive = announceKeep && keep;
        http10 = announceKeep;
        start = b.len;
    }

    /// A whole, well-formed response is in the buffer.
    bool complete() const { return done && !misused; }

    /// Bytes this response put in the buffer (status line, headers and body).
    size_t bytesWritten() const { return buf.len > start ? buf.len - start : 0; }

    /// The value of a header added with `header` (case-insensitive name), or null.
    const(char)[] headerValue(const(char)[] name) const
    {
        import aurora.parser : ieq;

        if (bag is null)
            return null;
        const(char)[] rest = bag.lines();
        while (rest.length)
        {
            size_t end = 0;
            while (rest[end] != '\r')
                end++;
            const line = rest[0 .. end];
            rest = rest[end + 2 .. $];
            if (line.length > name.length + 1 && line[name.length] == ':' && ieq(line[0 .. name.length], name))
                return line[name.length + 2 .. $];
        }
        return null;
    }

    /// Add the header `name: value` to the response about to be written (before `send` or `begin`).
    /// A name that is not a token, a value with CR, LF or other control bytes, or headers past the bag's
    /// 2 KiB are a misuse: the client gets one clean 500.
    void header(const(char)[] name, const(char)[] value)
    {
        if (done || streaming || misused || bag is null || !validFieldName(name) || !validFieldValue(value)
                || !bag.add(name, value))
            misuse();
    }

    /// Add a `Set-Cookie` header. The name must be a token and the value cookie-octets (RFC 6265 §4.1.1:
    /// no space, '"', ',', ';' or '\\'; encode anything else first); attribute values may not hold ';'.
    void setCookie(const(char)[] name, const(char)[] value, CookieOptions o = CookieOptions.init)
    {
        char[HeaderBag.capacity] line = void;
        size_t n = 0;
        bool ok = validFieldName(name) && cookieOctets(value) && attrValue(o.path) && attrValue(o.domain)
            && (o.sameSite.length == 0 || o.sameSite == "Strict" || o.sameSite == "Lax" || o.sameSite == "None");
        void add(const(char)[] s)
        {
            if (n + s.length > line.length)
                ok = false;
            else
            {
                line[n .. n + s.length] = s[];
                n += s.length;
            }
        }

        add(name);
        add("=");
        add(value);
        if (o.path.length) { add("; Path="); add(o.path); }
        if (o.domain.length) { add("; Domain="); add(o.domain); }
        if (o.maxAge != long.min)
        {
            char[20] t;
            add("; Max-Age=");
            if (o.maxAge < 0)
                add("0"); // expire now
            else
                add(formatUint(o.maxAge, t));
        }
        if (o.secure) add("; Secure");
        if (o.httpOnly) add("; HttpOnly");
        if (o.sameSite.length) { add("; SameSite="); add(o.sameSite); }
        if (!ok)
        {
            misuse();
            return;
        }
        header("Set-Cookie", line[0 .. n]);
    }

    /// Take back everything this response wrote, so another one can be sent.
    void discard()
    {
        if (committed)
        {   // bytes are on the wire: nothing can be taken back (the connection will be closed)
            misused = true;
            return;
        }
        if (buf.len > start)
            buf.len = start;
        done = misused = streaming = chunked = false;
        status = 0;
    }

    /// The buffer's first `n` bytes were written out and removed: move the offsets with them.
    void shiftDown(size_t n)
    {
        static size_t down(size_t v, size_t n) { return v > n ? v - n : 0; }

        start = down(start, n);
        clPos = down(clPos, n);
        bodyStart = down(bodyStart, n);
        chunkStart = down(chunkStart, n);
    }

    /// The status line and headers of a body of `length` bytes that `fileBody` then sends from a file.
    void beginFile(ushort code, const(char)[] contentType, ulong length)
    {
        if (done || streaming || misused)
        {
            misuse();
            return;
        }
        if (!headersValid(contentType, null))
            return;
        head(code, contentType, null);
        buf.put("Content-Length: ");
        buf.putUint(length);
        buf.put("\r\n\r\n");
        done = true;
    }

    /// The body `beginFile` announced: `length` bytes of `fd` from `offset`. In a fiber handler they go from
    /// the file to the socket (sendfile); elsewhere they are read into the buffer (at most 64 MiB).
    void fileBody(int fd, ulong offset, ulong length)
    {
        import core.sys.posix.unistd : pread;

        if (!done || misused || headOnly)
            return;
        if (fileHook !is null)
        {
            if (!fileHook(sendCtx, fd, offset, length))
                committed = misused = true; // cut short: the connection closes
            return;
        }
        if (length > 64 << 20 || !buf.reserve(cast(size_t) length))
        {
            misuse();
            return;
        }
        for (ulong got = 0; got < length;)
        {
            const n = pread(fd, buf.ptr + buf.len, cast(size_t)(length - got), cast(long)(offset + got));
            if (n <= 0)
            {
                misuse();
                return;
            }
            buf.len += n;
            got += n;
        }
    }

    /// Streaming a body of unknown length: `Transfer-Encoding: chunked` (HTTP/1.0: no coding and
    /// `Connection: close`, the body ends with the connection). Then `put…`, `flush` to send what is there
    /// (from a fiber handler), and `finish`.
    void beginChunked(ushort code, const(char)[] contentType, const(char)[] extraHeaders = null)
    {
        if (done || streaming || misused)
        {
            misuse();
            return;
        }
        if (!headersValid(contentType, extraHeaders))
            return;
        streaming = chunked = true;
        if (http10)
            keepAlive = announceKeepAlive = false;
        head(code, contentType, extraHeaders);
        buf.put(http10 ? "\r\n" : "Transfer-Encoding: chunked\r\n\r\n");
        bodyStart = buf.len;
        openChunk();
    }

    /// Close the current chunk and, in a fiber handler, send everything buffered, waiting until the socket has
    /// taken it (backpressure). False when the client is gone: the handler should stop.
    bool flush()
    {
        if (!inBody() || !chunked)
            return misuse();
        closeChunk();
        bool ok = true;
        if (sendHook !is null && !headOnly)
            ok = sendHook(sendCtx);
        openChunk();
        return ok;
    }

    private enum placeholder = "00000000\r\n"; // a chunk size (8 hex digits: leading zeros are allowed)

    private void openChunk()
    {
        chunkStart = buf.len;
        if (!http10 && !headOnly)
            buf.put(placeholder);
    }

    private void closeChunk()
    {
        if (headOnly)
        {
            buf.len = bodyStart; // HEAD: the headers only
            return;
        }
        if (http10 || buf.failed)
            return;
        const size = buf.len - chunkStart - placeholder.length;
        if (size == 0)
        {
            buf.len = chunkStart; // an empty chunk would end the body
            return;
        }
        static immutable hex = "0123456789abcdef";
        foreach (i; 0 .. 8)
            buf.ptr[chunkStart + i] = hex[(size >> (28 - 4 * i)) & 15];
        buf.put("\r\n");
    }

    private bool misuse()
    {
        misused = true;
        return false;
    }

    /// True while body bytes may be added; otherwise flags the misuse.
    private bool inBody() { return streaming ? true : misuse(); }

    /// The handler's header text can only be header fields: a content type or extra header carrying
    /// a CR or LF would let it (or the data it echoes) inject headers or a whole response.
    private bool headersValid(const(char)[] contentType, const(char)[] extraHeaders)
    {
        return validFieldValue(contentType) && validHeaderLines(extraHeaders) ? true : misuse();
    }

    private void head(ushort code, const(char)[] contentType, const(char)[] extraHeaders)
    {
        status = code;
        buf.put(statusLine(code));
        buf.put(dateLine());
        if (!keepAlive)
            buf.put("Connection: close\r\n");
        else if (announceKeepAlive)
            buf.put("Connection: keep-alive\r\n");
        if (contentType.length)
        {
            buf.put("Content-Type: ");
            buf.put(contentType);
            buf.put("\r\n");
        }
        if (extraHeaders.length)
            buf.put(extraHeaders); // each line ends with CRLF
        if (bag !is null && bag.len)
            buf.put(bag.lines());
    }

    /// Direct path: whole response with a body known up front.
    void send(ushort code, const(char)[] contentType, const(void)[] body,
              const(char)[] extraHeaders = null)
    {
        if (done || streaming || misused)
        {
            misuse();
            return;
        }
        if (!headersValid(contentType, extraHeaders))
            return;
        buf.reserve(160 + contentType.length + extraHeaders.length + body.length + (bag ? bag.len : 0));
        head(code, contentType, extraHeaders);
        buf.put("Content-Length: ");
        buf.putUint(body.length);
        buf.put("\r\n\r\n");
        if (!headOnly)
            buf.put(body);
        done = true;
    }

    /// Streaming path: write headers, then the body with put*, then finish().
    void begin(ushort code, const(char)[] contentType, const(char)[] extraHeaders = null)
    {
        if (done || streaming || misused)
        {
            misuse();
            return;
        }
        if (!headersValid(contentType, extraHeaders))
            return;
        streaming = true;
        head(code, contentType, extraHeaders);
        buf.put("Content-Length: ");
        clPos = buf.len;
        buf.put("          \r\n\r\n"[0 .. clWidth + 4]);
        bodyStart = buf.len;
    }

    void put(const(char)[] s) { if (inBody()) buf.put(s); }
    void put(const(ubyte)[] s) { if (inBody()) buf.put(s); }
    void putChar(char c) { if (inBody()) buf.putChar(c); }
    void putUint(ulong v) { if (inBody()) buf.putUint(v); }
    void putInt(long v) { if (inBody()) buf.putInt(v); }

    /// A JSON string literal with the escapes RFC 8259 requires.
    void putJsonString(const(char)[] s)
    {
        static immutable hex = "0123456789abcdef";
        if (!inBody())
            return;
        buf.reserve(s.length + 2);
        buf.putChar('"');
        size_t run = 0;
        foreach (i, char c; s)
        {
            if (c >= 0x20 && c != '"' && c != '\\')
                continue;
            buf.put(s[run .. i]);
            run = i + 1;
            switch (c)
            {
            case '"': buf.put(`\"`); break;
            case '\\': buf.put(`\\`); break;
            case '\n': buf.put(`\n`); break;
            case '\r': buf.put(`\r`); break;
            case '\t': buf.put(`\t`); break;
            default:
                char[6] u = `\u00  `;
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                buf.put(u[]);
            }
        }
        buf.put(s[run .. $]);
        buf.putChar('"');
    }

    /// Patch the Content-Length in and close the streamed response (a chunked one: its last chunk).
    void finish()
    {
        if (!inBody())
            return;
        streaming = false;
        if (chunked)
        {
            closeChunk();
            if (!http10 && !headOnly)
                buf.put("0\r\n\r\n");
            done = true;
            return;
        }
        if (buf.failed)
            return;
        const n = buf.len - bodyStart;
        char[20] tmp;
        const digits = formatUint(n, tmp);
        auto p = buf.ptr + clPos;
        memcpy(p, digits.ptr, digits.length);
        const gap = clWidth - digits.length;
        if (headOnly)
        {
            memcpy(p + digits.length, "\r\n\r\n".ptr, 4);
            buf.len = clPos + digits.length + 4;
        }
        else if (gap)
        {
            memmove(p + digits.length, p + clWidth, buf.len - (clPos + clWidth));
            buf.len -= gap;
        }
        done = true;
    }
}

unittest
{
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.send(200, "text/plain", "Hello, World!");
    auto s = cast(const(char)[]) b.data;
    assert(s[0 .. 17] == "HTTP/1.1 200 OK\r\n");
    assert(s[17 .. 33] == "Server: aurora\r\n");
    assert(s[33 .. 39] == "Date: " && s[68 .. 70] == "\r\n");
    assert(s[70 .. $] == "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!");
}

unittest
{   // streamed body: Content-Length patched, body moved into place
    Buffer b;
    scope (exit) b.release();
    b.put("previous");
    auto r = Response(&b, false, false);
    r.begin(404, "application/json");
    r.putChar('{');
    r.putJsonString("a\"b\\\n\x01");
    r.put(":");
    r.putInt(-42);
    r.putChar('}');
    r.finish();
    auto s = cast(const(char)[]) b.data;
    assert(s[0 .. 8] == "previous");
    assert(s[8 .. 40] == "HTTP/1.1 404 Not Found\r\nServer: ");
    import std.algorithm.searching : canFind, endsWith;
    assert(s.canFind("Connection: close\r\n"));
    enum body = `{"a\"b\\\n\u0001":-42}`;
    assert(s.endsWith("Content-Type: application/json\r\nContent-Length: 22\r\n\r\n" ~ body));
    assert(body.length == 22);
}

unittest
{   // HEAD: same headers, no body
    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, true, true);
    r.begin(200, "text/plain");
    r.put("12345");
    r.finish();
    import std.algorithm.searching : endsWith;
    assert((cast(const(char)[]) b.data).endsWith("Content-Length: 5\r\n\r\n"));
    b.len = 0;
    r = Response(&b, true, true);
    r.send(200, "text/plain", "abc");
    assert((cast(const(char)[]) b.data).endsWith("Content-Length: 3\r\n\r\n"));
}

unittest
{   // header injection through the content type or the extra headers is refused before any output
    Buffer b;
    scope (exit) b.release();
    static immutable string[2][7] cases = [["text/plain\r\nX-Evil: 1", null], ["text/plain", "X-A: 1\r\nInjected"],
        ["text/plain", "X-A: 1\nX-B: 2\r\n"], ["text/plain", "Bad Name: v\r\n"], ["text/plain", ": v\r\n"],
        ["text/plain", "X-A: 1\r\n\r\nHTTP/1.1 200 OK\r\n"], ["text/plain", "X-A: a\0b\r\n"]];
    foreach (bad; cases)
    {
        b.len = 0;
        auto r = Response(&b, false, true);
        r.send(200, bad[0], "x", bad[1]);
        assert(r.misused && b.len == 0, bad[1]);
        r = Response(&b, false, true);
        r.begin(200, bad[0], bad[1]);
        assert(r.misused && b.len == 0, bad[1]);
    }
    auto r = Response(&b, false, true);
    r.send(200, "text/plain; charset=utf-8", "x", "X-A: 1\r\nCache-Control: no-store, max-age=0\r\n");
    assert(r.complete());
    import std.algorithm.searching : canFind;
    assert((cast(const(char)[]) b.data).canFind("X-A: 1\r\nCache-Control: no-store, max-age=0\r\nContent-Length: 1"));
}

unittest
{
    assert(statusLine(431) == "HTTP/1.1 431 Request Header Fields Too Large\r\nServer: aurora\r\n");
    char[20] t;
    assert(formatUint(0, t) == "0" && formatUint(18446744073709551615UL, t) == "18446744073709551615");
}

unittest
{   // misuse is flagged and stops output; discard takes the response back
    Buffer b;
    scope (exit) b.release();
    b.put("before");
    auto r = Response(&b, false, true);
    r.send(200, "text/plain", "one");
    assert(r.complete);
    const afterOne = b.len;
    r.send(200, "text/plain", "two");   // send twice
    assert(r.misused && !r.complete && b.len == afterOne);
    r.put("x");
    assert(b.len == afterOne);
    r.discard();
    assert(b.len == 6 && !r.done && !r.misused);
    r.send(500, "text/plain", "clean");
    assert(r.complete);

    b.len = 0;
    r = Response(&b, false, true);
    r.put("no begin");                  // put before begin
    assert(r.misused && b.len == 0);

    r = Response(&b, false, true);
    r.begin(200, "text/plain");
    r.put("half");                      // begin without finish
    assert(!r.done && !r.misused);
    r.discard();
    assert(b.len == 0);

    r = Response(&b, false, true);
    r.begin(200, "text/plain");
    r.begin(200, "text/plain");         // begin twice
    r.finish();
    assert(r.misused && !r.complete);

    // HTTP/1.0 keep-alive is announced; HTTP/1.1's is implicit
    import std.algorithm.searching : canFind;
    b.len = 0;
    r = Response(&b, false, true, true);
    r.send(200, "text/plain", "x");
    assert((cast(const(char)[]) b.data).canFind("Connection: keep-alive\r\n"));
    b.len = 0;
    r = Response(&b, false, false, true);
    r.send(200, "text/plain", "x");
    assert(!(cast(const(char)[]) b.data).canFind("keep-alive"));
}

unittest
{   // headers and cookies added before the status line; bad ones are a misuse
    import std.algorithm.searching : canFind;

    Buffer b;
    scope (exit) b.release();
    HeaderBag bag;
    auto r = Response(&b, false, true);
    r.bag = &bag;
    r.header("X-Request-Id", "abc-1");
    CookieOptions o;
    o.path = "/";
    o.maxAge = 3600;
    o.httpOnly = true;
    o.sameSite = "Lax";
    r.setCookie("sid", "v4lue", o);
    r.send(200, "text/plain", "ok");
    auto s = cast(const(char)[]) b.data;
    assert(r.complete && s.canFind("\r\nX-Request-Id: abc-1\r\n"), s);
    assert(s.canFind("\r\nSet-Cookie: sid=v4lue; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax\r\n"), s);

    foreach (i; 0 .. 6)
    {
        b.len = 0;
        bag.len = 0;
        r = Response(&b, false, true);
        r.bag = &bag;
        final switch (i)
        {
        case 0: r.header("Bad Name", "v"); break;
        case 1: r.header("X", "a\r\nInjected: 1"); break;
        case 2: r.setCookie("sid", "a;b"); break;
        case 3: r.setCookie("sid", "a b"); break;
        case 4: o.path = "/;x"; r.setCookie("sid", "v", o); break;
        case 5: r.send(200, "text/plain", "x"); r.header("X", "late"); break;
        }
        assert(!r.complete);
    }
    b.len = 0;
    r = Response(&b, false, true); // no bag: header() is refused
    r.header("X", "y");
    assert(r.misused);
}

unittest
{   // chunked bodies: sizes patched, empty chunks dropped, HEAD and HTTP/1.0 handled
    import std.algorithm.searching : canFind, endsWith;

    Buffer b;
    scope (exit) b.release();
    auto r = Response(&b, false, true);
    r.beginChunked(200, "text/plain");
    r.put("hello ");
    assert(r.flush());
    assert(r.flush()); // nothing since the last: no empty chunk
    r.put("world, this is chunk two");
    r.finish();
    auto s = cast(const(char)[]) b.data;
    assert(r.complete && s.canFind("Transfer-Encoding: chunked\r\n\r\n") && !s.canFind("Content-Length"), s);
    assert(s.endsWith("\r\n\r\n00000006\r\nhello \r\n00000018\r\nworld, this is chunk two\r\n0\r\n\r\n"), s);

    b.len = 0;
    r = Response(&b, true, true); // HEAD
    r.beginChunked(200, "text/plain");
    r.put("dropped");
    r.flush();
    r.put("dropped too");
    r.finish();
    s = cast(const(char)[]) b.data;
    assert(r.complete && s.endsWith("Transfer-Encoding: chunked\r\n\r\n"), s);

    b.len = 0;
    r = Response(&b, false, true, true); // HTTP/1.0 keep-alive: no chunks, close-delimited
    r.beginChunked(200, "text/plain");
    r.put("a");
    r.flush();
    r.put("b");
    r.finish();
    s = cast(const(char)[]) b.data;
    assert(r.complete && s.canFind("Connection: close\r\n") && !s.canFind("Transfer-Encoding") && s.endsWith("\r\n\r\nab"), s);

    b.len = 0;
    r = Response(&b, false, true);
    r.begin(200, "text/plain");
    assert(!r.flush() && r.misused); // flush belongs to chunked bodies
}

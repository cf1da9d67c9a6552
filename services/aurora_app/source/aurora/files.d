/**
 * Files: `sendFile` answers with a file, and `staticFiles(root)` is a handler serving a folder under a
 * wildcard route (`r.get("/static/*path", staticFiles("public"))`).
 *
 * Conditional and partial requests (RFC 9110 §13, §14): every answer carries a strong `ETag` (inode, size
 * and modification time) and `Last-Modified`; `If-None-Match` (or, without it, `If-Modified-Since`) that
 * matches gets 304; a single `Range: bytes=a-b`, `a-` or `-n` gets 206 with `Content-Range` (416 with
 * `Content-Range: bytes *\/size` when it starts past the end); several ranges, a malformed one or an
 * `If-Range` that no longer matches get the whole file. In a fiber handler the body goes from the file to
 * the socket with sendfile(2), at the client's pace; elsewhere it is read into the response.
 */
module aurora.files;

import core.sys.posix.fcntl : open, O_RDONLY;
import core.sys.posix.sys.stat : fstat, stat_t, S_IFMT, S_IFREG;
import core.sys.posix.unistd : close, pread;

import aurora.date : dateLineLength, renderDateLine;
import aurora.parser : Request, Method, trim;
import aurora.response : Response, formatUint;

private enum O_CLOEXEC_ = 0x80000;

/// Answer `req` with the file at `path` (404 when it is not a readable regular file).
void sendFile(ref const Request req, ref Response res, const(char)[] path, const(char)[] contentType = null)
    @nogc nothrow
{
    char[4096] z = void;
    if (path.length >= z.length)
    {
        res.send(404, "text/plain", "not found\n");
        return;
    }
    z[0 .. path.length] = path[];
    z[path.length] = 0;
    const fd = open(z.ptr, O_RDONLY | O_CLOEXEC_);
    if (fd < 0)
    {
        res.send(404, "text/plain", "not found\n");
        return;
    }
    scope (exit) close(fd);
    stat_t st;
    if (fstat(fd, &st) != 0 || (st.st_mode & S_IFMT) != S_IFREG)
    {
        res.send(404, "text/plain", "not found\n");
        return;
    }
    sendOpenFile(req, res, fd, st, contentType.length ? contentType : contentTypeOf(path));
}

private void sendOpenFile(ref const Request req, ref Response res, int fd, ref const stat_t st,
                          const(char)[] contentType) @nogc nothrow
{
    const size = cast(ulong) st.st_size;
    char[64] etagRoom = void;
    const etag = makeEtag(st, etagRoom);
    char[dateLineLength] lm = void;
    renderDateLine(st.st_mtime, lm);
    const lastModified = lm[6 .. $ - 2];

    res.header("ETag", etag);
    res.header("Last-Modified", lastModified);
    res.header("Accept-Ranges", "bytes");
    if (notModified(req, etag, lastModified))
    {
        res.send(304, null, null);
        return;
    }
    ulong first = 0, last = size ? size - 1 : 0;
    ushort status = 200;
    const range = req.header("range");
    const ifRange = req.header("if-range");
    if (range !is null && (ifRange is null || ifRange == etag))
    {
        ulong a, b; // (out parameters: set only for a partial answer)
        final switch (parseRange(range, size, a, b))
        {
        case RangeResult.ignore:
            break;
        case RangeResult.unsatisfiable:
            char[48] cr = void;
            res.header("Content-Range", contentRange(cr, 0, 0, size, true));
            res.send(416, "text/plain", "range not satisfiable\n");
            return;
        case RangeResult.partial:
            status = 206;
            first = a;
            last = b;
            char[80] cr = void;
            res.header("Content-Range", contentRange(cr, first, last, size, false));
            break;
        }
    }
    const length = size == 0 ? 0 : last - first + 1;
    res.beginFile(status, contentType, length);
    if (res.headOnly || length == 0)
        return;
    res.fileBody(fd, first, length);
}

/// `"<inode>-<size>-<mtime ns>"` in hex: changes whenever the file is replaced or written.
private const(char)[] makeEtag(ref const stat_t st, return ref char[64] room) @nogc nothrow
{
    static immutable hex = "0123456789abcdef";
    size_t n = 0;
    void put(ulong v)
    {
        char[16] t;
        size_t k = 0;
        do
        {
            t[k++] = hex[v & 15];
            v >>= 4;
        }
        while (v);
        while (k)
            room[n++] = t[--k];
    }

    room[n++] = '"';
    put(cast(ulong) st.st_ino);
    room[n++] = '-';
    put(cast(ulong) st.st_size);
    room[n++] = '-';
    put(cast(ulong) st.st_mtime * 1_000_000_000UL + cast(ulong) st.st_mtimensec);
    room[n++] = '"';
    return room[0 .. n];
}

/// If-None-Match (weak comparison, `*`), or without it If-Modified-Since equal to Last-Modified.
private bool notModified(ref const Request req, const(char)[] etag, const(char)[] lastModified) @nogc nothrow
{
    const inm = req.header("if-none-match");
    if (inm !is null)
    {
        const(char)[] rest = inm;
        while (rest.length)
        {
            size_t end = 0;
            while (end < rest.length && rest[end] != ',')
                end++;
            auto tag = trim(rest[0 .. end]);
            rest = end < rest.length ? rest[end + 1 .. $] : null;
            if (tag == "*")
                return true;
            if (tag.length > 2 && tag[0 .. 2] == "W/")
                tag = tag[2 .. $];
            if (tag == etag)
                return true;
        }
        return false;
    }
    const ims = req.header("if-modified-since");
    return ims !is null && trim(ims) == lastModified;
}

enum RangeResult { ignore, partial, unsatisfiable }

/// One `bytes=` range of a `size`-byte file into [first, last]; several ranges or bad syntax are ignored.
RangeResult parseRange(const(char)[] v, ulong size, out ulong first, out ulong last) @nogc nothrow pure
{
    v = trim(v);
    if (v.length < 7 || v[0 .. 6] != "bytes=")
        return RangeResult.ignore;
    v = trim(v[6 .. $]);
    size_t dash = 0;
    while (dash < v.length && v[dash] != '-')
        dash++;
    if (dash == v.length)
        return RangeResult.ignore;
    foreach (char c; v)
        if (c == ',')
            return RangeResult.ignore; // several ranges: the whole file is a valid answer
    ulong a, b;
    const hasA = digits(trim(v[0 .. dash]), a), hasB = digits(trim(v[dash + 1 .. $]), b);
    if (!hasA && !hasB)
        return RangeResult.ignore;
    if (!hasA)
    {   // the last b bytes
        if (trim(v[0 .. dash]).length || b == 0)
            return b == 0 && !trim(v[0 .. dash]).length ? RangeResult.unsatisfiable : RangeResult.ignore;
        if (size == 0)
            return RangeResult.unsatisfiable;
        first = b >= size ? 0 : size - b;
        last = size - 1;
        return RangeResult.partial;
    }
    if (trim(v[dash + 1 .. $]).length && !hasB)
        return RangeResult.ignore;
    if (hasB && b < a)
        return RangeResult.ignore;
    if (a >= size)
        return RangeResult.unsatisfiable;
    first = a;
    last = hasB && b < size ? b : size - 1;
    return RangeResult.partial;
}

private bool digits(const(char)[] s, out ulong v) @nogc nothrow pure
{
    if (s.length == 0 || s.length > 19)
        return false;
    foreach (char c; s)
    {
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    return true;
}

private const(char)[] contentRange(return ref char[80] room, ulong first, ulong last, ulong size,
                                   bool unsatisfied) @nogc nothrow
{
    size_t n = 0;
    void add(const(char)[] s)
    {
        room[n .. n + s.length] = s[];
        n += s.length;
    }

    char[20] t;
    add("bytes ");
    if (unsatisfied)
        add("*");
    else
    {
        add(formatUint(first, t));
        add("-");
        add(formatUint(last, t));
    }
    add("/");
    add(formatUint(size, t));
    return room[0 .. n];
}

private const(char)[] contentRange(return ref char[48] room, ulong first, ulong last, ulong size,
                                   bool unsatisfied) @nogc nothrow
{
    char[80] wide;
    const s = contentRange(wide, first, last, size, unsatisfied);
    room[0 .. s.length] = s[];
    return room[0 .. s.length];
}

/// The content type of a file by its extension (application/octet-stream for the others).
const(char)[] contentTypeOf(const(char)[] path) @nogc nothrow pure
{
    static immutable string[2][] types = [
        [".html", "text/html; charset=utf-8"], [".htm", "text/html; charset=utf-8"],
        [".css", "text/css; charset=utf-8"], [".js", "text/javascript; charset=utf-8"],
        [".mjs", "text/javascript; charset=utf-8"], [".json", "application/json"],
        [".txt", "text/plain; charset=utf-8"], [".csv", "text/csv; charset=utf-8"],
        [".xml", "application/xml"], [".svg", "image/svg+xml"], [".png", "image/png"],
        [".jpg", "image/jpeg"], [".jpeg", "image/jpeg"], [".gif", "image/gif"], [".webp", "image/webp"],
        [".ico", "image/x-icon"], [".wasm", "application/wasm"], [".pdf", "application/pdf"],
        [".woff2", "font/woff2"], [".woff", "font/woff"], [".mp4", "video/mp4"], [".gz", "application/gzip"],
    ];
    foreach (ref t; types)
        if (path.length > t[0].length && lowerEquals(path[$ - t[0].length .. $], t[0]))
            return t[1];
    return "application/octet-stream";
}

private bool lowerEquals(const(char)[] a, const(char)[] lower) @nogc nothrow pure
{
    foreach (i, char c; a)
        if ((c >= 'A' && c <= 'Z' ? cast(char)(c + 32) : c) != lower[i])
            return false;
    return true;
}

/// Whether the decoded wildcard `rel` stays inside the served folder: no `..` or empty segment, no NUL or
/// backslash, not absolute.
bool safeRelativePath(const(char)[] rel) @nogc nothrow pure
{
    if (rel.length == 0 || rel[0] == '/')
        return false;
    size_t s = 0;
    foreach (i; 0 .. rel.length + 1)
    {
        if (i < rel.length && (rel[i] == 0 || rel[i] == '\\'))
            return false;
        if (i == rel.length || rel[i] == '/')
        {
            const seg = rel[s .. i];
            if (seg.length == 0 || seg == "." || seg == "..")
                return false;
            s = i + 1;
        }
    }
    return true;
}

/**
 * A handler serving the files under `root` for a route ending in a wildcard named `path`
 * (`r.get("/static/*path", staticFiles("public"))`). A path with `..`, an empty segment, a NUL or a
 * backslash, or one that is not a regular file, gets 404. It runs in a fiber (sendfile waits for the client).
 */
auto staticFiles(string root)
{
    import aurora.router : Params;

    static struct Folder
    {
        string root;

        void serve(ref const Request req, ref Response res, ref const Params p)
        {
            const rel = p["path"];
            char[4096] full = void;
            if (rel is null || !safeRelativePath(rel) || root.length + 1 + rel.length >= full.length)
            {
                res.send(404, "text/plain", "not found\n");
                return;
            }
            full[0 .. root.length] = root[];
            full[root.length] = '/';
            full[root.length + 1 .. root.length + 1 + rel.length] = rel[];
            sendFile(req, res, full[0 .. root.length + 1 + rel.length]);
        }
    }

    auto f = new Folder(root);
    return &f.serve;
}

unittest
{
    ulong a, b;
    assert(parseRange("bytes=0-9", 100, a, b) == RangeResult.partial && a == 0 && b == 9);
    assert(parseRange("bytes=90-", 100, a, b) == RangeResult.partial && a == 90 && b == 99);
    assert(parseRange("bytes=-10", 100, a, b) == RangeResult.partial && a == 90 && b == 99);
    assert(parseRange("bytes=-1000", 100, a, b) == RangeResult.partial && a == 0 && b == 99);
    assert(parseRange("bytes=50-1000", 100, a, b) == RangeResult.partial && a == 50 && b == 99);
    assert(parseRange("bytes=100-", 100, a, b) == RangeResult.unsatisfiable);
    assert(parseRange("bytes=-0", 100, a, b) == RangeResult.unsatisfiable);
    foreach (bad; ["bytes=5-1", "bytes=0-1,3-4", "items=0-1", "bytes=a-b", "bytes=", "bytes=-", "bytes=1-x"])
        assert(parseRange(bad, 100, a, b) == RangeResult.ignore, bad);
    assert(safeRelativePath("css/site.css") && !safeRelativePath("../etc/passwd") && !safeRelativePath("a/../b"));
    assert(!safeRelativePath("/abs") && !safeRelativePath("a//b") && !safeRelativePath("a\\b") && !safeRelativePath(""));
    assert(contentTypeOf("x/INDEX.HTML") == "text/html; charset=utf-8" && contentTypeOf("a.bin") == "application/octet-stream");
}

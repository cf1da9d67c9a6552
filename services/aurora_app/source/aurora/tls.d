/**
 * TLS through OpenSSL 3 (libssl): a server context made once from a certificate chain and a key, and the
 * record-layer reads and writes of a connection, with the results of read(2)/write(2) (a count, 0 at the
 * peer's close, -1 with errno EAGAIN while the socket has nothing or takes nothing) so that the event loop
 * drives a TLS connection as it drives a plain one.
 *
 * The declarations below are written by hand: no D binding of OpenSSL (deimos-openssl is a dub package) can
 * be fetched here. Only the calls used are declared, checked against OpenSSL 3.0's headers; the macros
 * (SSL_CTX_set_mode, SSL_CTX_set_min_proto_version) are spelled as the SSL_CTX_ctrl calls they expand to.
 */
module aurora.tls;

import core.stdc.errno : errno, EAGAIN, ECONNRESET;

struct SSL_CTX;
struct SSL;
struct SSL_METHOD;

extern (C) nothrow @nogc
{
    int OPENSSL_init_ssl(ulong opts, const(void)* settings);
    const(SSL_METHOD)* TLS_server_method();
    SSL_CTX* SSL_CTX_new(const(SSL_METHOD)* method);
    void SSL_CTX_free(SSL_CTX* ctx);
    c_long SSL_CTX_ctrl(SSL_CTX* ctx, int cmd, c_long larg, void* parg);
    ulong SSL_CTX_set_options(SSL_CTX* ctx, ulong op);
    int SSL_CTX_use_certificate_chain_file(SSL_CTX* ctx, const(char)* file);
    int SSL_CTX_use_PrivateKey_file(SSL_CTX* ctx, const(char)* file, int type);
    int SSL_CTX_check_private_key(const(SSL_CTX)* ctx);
    int SSL_CTX_set_session_id_context(SSL_CTX* ctx, const(ubyte)* sid, uint len);
    alias AlpnSelect = int function(SSL* ssl, const(ubyte)** out_, ubyte* outlen, const(ubyte)* in_, uint inlen,
                                    void* arg);
    void SSL_CTX_set_alpn_select_cb(SSL_CTX* ctx, AlpnSelect cb, void* arg);
    int SSL_select_next_proto(ubyte** out_, ubyte* outlen, const(ubyte)* server, uint serverLen,
                              const(ubyte)* client, uint clientLen);

    SSL* SSL_new(SSL_CTX* ctx);
    void SSL_free(SSL* ssl);
    int SSL_set_fd(SSL* ssl, int fd);
    void SSL_set_accept_state(SSL* ssl);
    int SSL_is_init_finished(const(SSL)* ssl);
    int SSL_read(SSL* ssl, void* buf, int num);
    int SSL_write(SSL* ssl, const(void)* buf, int num);
    int SSL_shutdown(SSL* ssl);
    int SSL_get_error(const(SSL)* ssl, int ret);

    c_ulong ERR_get_error();
    void ERR_clear_error();
    void ERR_error_string_n(c_ulong e, char* buf, size_t len);
}

import core.stdc.config : c_long, c_ulong;

private enum
{
    SSL_ERROR_WANT_READ = 2,
    SSL_ERROR_WANT_WRITE = 3,
    SSL_ERROR_ZERO_RETURN = 6,
    SSL_CTRL_MODE = 33,
    SSL_CTRL_SET_MIN_PROTO_VERSION = 123,
    TLS1_2_VERSION = 0x0303,
    SSL_FILETYPE_PEM = 1,
    SSL_TLSEXT_ERR_OK = 0,
    SSL_TLSEXT_ERR_NOACK = 3,
    OPENSSL_NPN_NEGOTIATED = 1,
}
// partial writes (the loop writes the rest later), a write buffer that may move between the retries of one
// write (the connection's buffer grows by realloc), and no record buffers (~34 KiB) kept by an idle connection,
// as nginx does: measured, 7 malloc calls per request and response with it, 4 without (OpenSSL 3.0's own
// 40-byte allocations per record)
private enum c_long modes = 0x1 | 0x2 | 0x10;
private enum ulong SSL_OP_IGNORE_UNEXPECTED_EOF = 1UL << 7, SSL_OP_NO_RENEGOTIATION = 1UL << 30;

// ALPN: this server speaks HTTP/1.1 only (length-prefixed protocol names)
private immutable ubyte[9] alpnHttp11 = [8, 'h', 't', 't', 'p', '/', '1', '.', '1'];

private extern (C) int selectAlpn(SSL*, const(ubyte)** out_, ubyte* outlen, const(ubyte)* in_, uint inlen,
                                  void*) nothrow @nogc
{
    ubyte* chosen;
    if (SSL_select_next_proto(&chosen, outlen, alpnHttp11.ptr, alpnHttp11.length, in_, inlen)
            != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; // the client offers only other protocols: no ALPN, HTTP/1.1 all the same
    *out_ = chosen;
    return SSL_TLSEXT_ERR_OK;
}

/// The server's TLS settings, shared by every worker (an SSL_CTX may make connections on several threads).
/// TLS 1.2 and 1.3; TLS 1.3 session tickets for resumption; ALPN `http/1.1`.
final class TlsContext
{
    SSL_CTX* ctx;

    /// Load the certificate chain (PEM, leaf first) and the private key (PEM). Null and `error` on failure.
    static TlsContext load(string certFile, string keyFile, out string error)
    {
        import std.string : toStringz;

        OPENSSL_init_ssl(0, null);
        ERR_clear_error();
        auto ctx = SSL_CTX_new(TLS_server_method());
        if (ctx is null)
        {
            error = "cannot create a TLS context: " ~ lastError();
            return null;
        }
        SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, modes, null);
        SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, null);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
        static immutable sid = "aurora";
        SSL_CTX_set_session_id_context(ctx, cast(const(ubyte)*) sid.ptr, cast(uint) sid.length);
        SSL_CTX_set_alpn_select_cb(ctx, &selectAlpn, null);
        if (SSL_CTX_use_certificate_chain_file(ctx, toStringz(certFile)) != 1)
            error = "cannot load the TLS certificate " ~ certFile ~ ": " ~ lastError();
        else if (SSL_CTX_use_PrivateKey_file(ctx, toStringz(keyFile), SSL_FILETYPE_PEM) != 1)
            error = "cannot load the TLS key " ~ keyFile ~ ": " ~ lastError();
        else if (SSL_CTX_check_private_key(ctx) != 1)
            error = "the TLS key does not match the certificate: " ~ lastError();
        if (error.length)
        {
            SSL_CTX_free(ctx);
            return null;
        }
        auto t = new TlsContext;
        t.ctx = ctx;
        return t;
    }

    /// A server-side TLS connection over the socket `fd` (its handshake runs on its first reads); null when
    /// OpenSSL is out of memory.
    SSL* accept(int fd) nothrow @nogc
    {
        auto ssl = SSL_new(ctx);
        if (ssl is null)
            return null;
        if (SSL_set_fd(ssl, fd) != 1)
        {
            SSL_free(ssl);
            return null;
        }
        SSL_set_accept_state(ssl);
        return ssl;
    }
}

/// OpenSSL's first queued error, as text (the queue is emptied).
private string lastError()
{
    char[256] buf = 0;
    const e = ERR_get_error();
    ERR_clear_error();
    if (e == 0)
        return "unknown error";
    ERR_error_string_n(e, buf.ptr, buf.length);
    import core.stdc.string : strlen;

    return buf[0 .. strlen(buf.ptr)].idup;
}

/// What the record layer waits for after a call that returned -1 with EAGAIN.
enum Want : ubyte { none, read, write }

private int clampLen(size_t len) nothrow @nogc
{
    return len > int.max ? int.max : cast(int) len;
}

/// Like read(2): decrypted bytes, 0 at the peer's close (close_notify or EOF), -1 with errno EAGAIN (`want`
/// tells whether the socket must become readable or writable first: a handshake writes too) or ECONNRESET.
ptrdiff_t tlsRecv(SSL* ssl, void* buf, size_t len, out Want want) nothrow @nogc
{
    ERR_clear_error(); // SSL_get_error looks at this thread's queue: a stale entry would be taken for ours
    const n = SSL_read(ssl, buf, clampLen(len));
    if (n > 0)
        return n;
    return failure(ssl, n, want);
}

/// Like write(2): bytes taken (a partial write is possible), -1 with errno EAGAIN (`want` as for tlsRecv) or
/// ECONNRESET.
ptrdiff_t tlsSend(SSL* ssl, const(void)* buf, size_t len, out Want want) nothrow @nogc
{
    if (len == 0)
        return 0;
    ERR_clear_error();
    const n = SSL_write(ssl, buf, clampLen(len));
    if (n > 0)
        return n;
    return failure(ssl, n, want);
}

private ptrdiff_t failure(SSL* ssl, int ret, ref Want want) nothrow @nogc
{
    switch (SSL_get_error(ssl, ret))
    {
    case SSL_ERROR_WANT_READ:
        want = Want.read;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        want = Want.write;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default: // a failed handshake, a bad record, the socket's own error, an EOF amid a record
        ERR_clear_error();
        errno = ECONNRESET;
        return -1;
    }
}

/// Send close_notify (best effort: a full socket or a gone peer is not waited for).
void tlsClose(SSL* ssl) nothrow @nogc
{
    ERR_clear_error();
    SSL_shutdown(ssl);
    ERR_clear_error();
}

/// Whether the handshake is over.
bool tlsEstablished(const(SSL)* ssl) nothrow @nogc
{
    return SSL_is_init_finished(ssl) == 1;
}

/// Free the connection's TLS state (not its socket).
void tlsFree(SSL* ssl) nothrow @nogc
{
    SSL_free(ssl);
}

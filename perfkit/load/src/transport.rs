//! Connections: TCP, or TLS over TCP with rustls (SNI, ALPN, `--insecure`, `--cacert`, client
//! certificates, session resumption on reconnect). Connect and handshake times are measured here,
//! apart from request latency.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A connection to the target, plain or TLS.
pub enum Stream {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The protocol the server chose by ALPN (TLS only).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Tcp(_) => None,
            Stream::Tls(t) => t.get_ref().1.alpn_protocol(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// TLS settings from the command line.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Accept any server certificate (signatures are still checked).
    pub insecure: bool,
    /// Trust these CA certificates (PEM) instead of the built-in web roots.
    pub cacert: Option<PathBuf>,
    /// Client certificate chain and key (PEM), for servers that ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Server name to send (SNI) and verify; default the URL's host.
    pub server_name: Option<String>,
    /// ALPN protocols to offer, in order (e.g. `h2`, `http/1.1`).
    pub alpn: Vec<Vec<u8>>,
}

/// How long one connection took to open.
#[derive(Debug, Clone, Copy)]
pub struct ConnectTimes {
    pub tcp: Duration,
    /// TLS handshake, and whether it resumed an earlier session.
    pub tls: Option<(Duration, bool)>,
}

/// Opens connections to one target; shared by the connections of a thread (TLS sessions are
/// cached in the config, so reconnects resume).
#[derive(Clone)]
pub struct Connector {
    pub addr: SocketAddr,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate in {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// Accepts any certificate, for `--insecure`: the handshake's signatures are still verified, so
/// the connection is encrypted, just not authenticated.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The rustls client configuration for `opts`.
pub fn client_config(opts: &TlsOptions) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let builder = if opts.insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        match &opts.cacert {
            Some(path) => {
                for c in read_certs(path)? {
                    roots.add(c).map_err(|e| format!("bad CA certificate in {}: {e}", path.display()))?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots)
    };
    let mut config = match &opts.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cannot read a private key from {}: {e}", key.display()))?;
            builder.with_client_auth_cert(read_certs(cert)?, key).map_err(|e| format!("client certificate: {e}"))?
        }
    };
    config.alpn_protocols = opts.alpn.clone();
    config.resumption = Resumption::in_memory_sessions(1024);
    Ok(config)
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("addr", &self.addr).field("tls", &self.tls.is_some()).finish()
    }
}

impl Connector {
    /// A connector to `addr`; with `tls`, the name to verify is `host` unless `--server-name` says otherwise.
    pub fn new(addr: SocketAddr, host: &str, tls: Option<&TlsOptions>) -> Result<Connector, String> {
        let tls = match tls {
            None => None,
            Some(opts) => {
                let name = opts.server_name.as_deref().unwrap_or(host).trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(name.to_string()).map_err(|e| format!("invalid TLS server name {name:?}: {e}"))?;
                Some((TlsConnector::from(Arc::new(client_config(opts)?)), name))
            }
        };
        Ok(Connector { addr, tls })
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Open a connection (and do the TLS handshake); the times each step took.
    pub async fn connect(&self) -> io::Result<(Stream, ConnectTimes)> {
        let t0 = Instant::now();
        let tcp = TcpStream::connect(self.addr).await?;
        tcp.set_nodelay(true)?;
        let t1 = Instant::now();
        let Some((connector, name)) = &self.tls else {
            return Ok((Stream::Tcp(tcp), ConnectTimes { tcp: t1 - t0, tls: None }));
        };
        let tls = connector.connect(name.clone(), tcp).await.map_err(|e| {
            let hint = if e.to_string().contains("certificate") { " (trust its CA with --cacert FILE, or skip the check with --insecure)" } else { "" };
            io::Error::new(e.kind(), format!("TLS handshake: {e}{hint}"))
        })?;
        let resumed = tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let times = ConnectTimes { tcp: t1 - t0, tls: Some((t1.elapsed(), resumed)) };
        Ok((Stream::Tls(Box::new(tls)), times))
    }
}

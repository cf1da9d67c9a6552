//! TLS configurations, each built once per process and shared (cloning a `ClientConfig` only
//! bumps the reference counts of its verifier, roots and session cache).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use pki_types::pem::PemObject;
use pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, NamedGroup, RootCertStore, SignatureScheme};

use crate::{ErrKind, Failure};

fn provider() -> Arc<CryptoProvider> {
    static P: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    P.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

fn finish(mut cfg: ClientConfig) -> ClientConfig {
    // HTTP/1.1 only, like requests
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // rustls' default session cache (256 names), behind the hook that tells the stage timings
    // when a handshake starts
    cfg.resumption = Resumption::store(Arc::new(TimedSessionStore(ClientSessionMemoryCache::new(256))));
    cfg
}

/// rustls' in-memory session store, unchanged, except that the calls rustls makes when it builds
/// the first ClientHello of a connection (just after TCP connected) mark the start of the TLS stage
/// for a request that asked for timings (`timing::note_tls_start`; a no-op otherwise).
#[derive(Debug)]
struct TimedSessionStore(ClientSessionMemoryCache);

impl ClientSessionStore for TimedSessionStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.0.set_kx_hint(server_name, group)
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        crate::timing::note_tls_start();
        self.0.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.0.set_tls12_session(server_name, value)
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        crate::timing::note_tls_start();
        self.0.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.0.remove_tls12_session(server_name)
    }

    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.0.insert_tls13_ticket(server_name, value)
    }

    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        crate::timing::note_tls_start();
        self.0.take_tls13_ticket(server_name)
    }
}

fn with_roots(roots: RootCertStore) -> ClientConfig {
    finish(
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Verifying configuration with the Mozilla root set (what certifi gives requests users).
/// `REQUESTS_CA_BUNDLE` / `SSL_CERT_FILE` are honoured by the Python layer, which passes the path.
pub fn verifying() -> &'static ClientConfig {
    static CFG: OnceLock<ClientConfig> = OnceLock::new();
    CFG.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        with_roots(roots)
    })
}

/// Configuration for `verify=False`: any certificate is accepted (signatures are still checked).
pub fn not_verifying() -> &'static ClientConfig {
    static CFG: OnceLock<ClientConfig> = OnceLock::new();
    CFG.get_or_init(|| {
        finish(
            ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default TLS versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider())))
                .with_no_client_auth(),
        )
    })
}

/// Verifying configuration trusting the certificates of one PEM bundle; built once per path.
pub fn with_bundle(path: &str) -> Result<ClientConfig, Failure> {
    static CACHE: OnceLock<Mutex<HashMap<String, ClientConfig>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(c) = cache.lock().unwrap().get(path) {
        return Ok(c.clone());
    }
    let bad = |msg: String| Failure::new(ErrKind::Ssl, msg);
    let mut roots = RootCertStore::empty();
    let iter = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(format!("could not read the CA bundle {path:?}: {e}")))?;
    for cert in iter {
        let cert = cert.map_err(|e| bad(format!("invalid certificate in the CA bundle {path:?}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("invalid certificate in the CA bundle {path:?}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad(format!("the CA bundle {path:?} holds no certificate")));
    }
    let cfg = with_roots(roots);
    cache.lock().unwrap().insert(path.to_owned(), cfg.clone());
    Ok(cfg)
}

#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
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

/// `base` presenting a client certificate: the PEM chain in `cert` and the PEM private key in `key`
/// (or in `cert` too, as requests' `cert="both.pem"`). Read once per call: a client keeps the result.
pub fn with_client_cert(mut base: ClientConfig, cert: &str, key: Option<&str>) -> Result<ClientConfig, Failure> {
    let bad = |msg: String| Failure::new(ErrKind::Ssl, msg);
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(format!("could not read the client certificate {cert:?}: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("invalid client certificate in {cert:?}: {e}")))?;
    if chain.is_empty() {
        return Err(bad(format!("{cert:?} holds no certificate")));
    }
    let key_path = key.unwrap_or(cert);
    let der = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| bad(format!("could not read a private key from {key_path:?}: {e}")))?;
    let signing = provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| bad(format!("unusable private key in {key_path:?}: {e}")))?;
    base.client_auth_cert_resolver = Arc::new(ClientCert(Arc::new(CertifiedKey::new(chain, signing))));
    Ok(base)
}

/// Always offers the one certificate it holds, whatever the server asks for.
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _root_hint_subjects: &[&[u8]], _sigschemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

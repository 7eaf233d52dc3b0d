//! TLS to the PostgreSQL server: rustls (ring), verifying the server's certificate against the
//! Mozilla roots (`webpki-roots`) plus, when configured, the operator's own CA file (PEM), and
//! its name against the host in the URL. This is the adapter between `tokio-postgres`'s
//! `MakeTlsConnect`/`TlsConnect`/`TlsStream` traits and `tokio-rustls`.
//!
//! SCRAM channel binding (`tls-server-end-point`) is not offered: it needs the hash named by the
//! certificate's signature algorithm, and the certificate check above already ties the session
//! to the server. The driver then authenticates without it, as it does over plain TCP.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use openphone_store::{Result, StoreError};
use postgres::Socket;
use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, InvalidDnsNameError, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Builds the rustls client configuration: Mozilla's roots, plus the certificates of `ca_file`.
pub(crate) fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>> {
    let invalid = |detail: String| StoreError::Invalid {
        what: "PostgreSQL TLS configuration",
        detail,
    };
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| invalid(format!("CA file {}: {e}", path.display())))?;
        let mut added = 0usize;
        for cert in certs {
            let cert = cert.map_err(|e| invalid(format!("CA file {}: {e}", path.display())))?;
            roots
                .add(cert)
                .map_err(|e| invalid(format!("CA file {}: {e}", path.display())))?;
            added += 1;
        }
        if added == 0 {
            return Err(invalid(format!(
                "CA file {} holds no PEM certificate",
                path.display()
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Makes one [`RustlsConnect`] per connection attempt.
#[derive(Clone)]
pub(crate) struct RustlsConnector {
    config: Arc<ClientConfig>,
}

impl RustlsConnector {
    pub(crate) fn new(config: Arc<ClientConfig>) -> Self {
        Self { config }
    }
}

impl MakeTlsConnect<Socket> for RustlsConnector {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = InvalidDnsNameError;

    fn make_tls_connect(
        &mut self,
        domain: &str,
    ) -> std::result::Result<RustlsConnect, Self::Error> {
        let name = ServerName::try_from(domain.to_owned())?;
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(Arc::clone(&self.config)),
            name,
        })
    }
}

/// One TLS handshake with the server named `name`.
pub(crate) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type Handshake = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Handshake;

    fn connect(self, stream: Socket) -> Handshake {
        Box::pin(async move {
            let stream = self.connector.connect(self.name, stream).await?;
            Ok(RustlsStream(stream))
        })
    }
}

/// An established TLS session over the driver's socket.
pub(crate) struct RustlsStream(tokio_rustls::client::TlsStream<Socket>);

impl AsyncRead for RustlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl postgres::tls::TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

//! The benchmark's HTTP/1.1 client, small and strict: the target (`http://` only, split into
//! what a request needs), one keep-alive connection with `TCP_NODELAY` that reads
//! `Content-Length`, chunked and close-delimited bodies, and says when the server closed it
//! before taking a request (so it may be sent again on a new connection).

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Where the clients send their requests.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) url: String,
    /// `host[:port]` as the URL says it: the `Host` header.
    pub(super) authority: String,
    /// `host:port` to connect to.
    pub(super) addr: String,
    /// The request target (`/mcp`).
    pub(super) path: String,
    pub(super) token: Option<String>,
}

/// Checks that `url` is an `http://` URL and splits it.
pub(super) fn http_target(url: &str, token: Option<String>) -> Result<Target> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    match scheme.to_ascii_lowercase().as_str() {
        "http" => {}
        "https" => bail!(
            "--url {url:?}: https:// is not supported by the benchmark (it speaks no TLS); use an http:// URL"
        ),
        _ => bail!("--url must be an http:// URL such as http://127.0.0.1:7788/mcp, not {url:?}"),
    }
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };
    if authority.is_empty() || authority.contains('@') || authority.contains(char::is_whitespace) {
        bail!("--url {url:?} names no usable host (user names are not supported)");
    }
    let has_port = match authority.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => authority.contains(':'),
    };
    let addr = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Ok(Target {
        url: url.to_owned(),
        authority: authority.to_owned(),
        addr,
        path,
        token,
    })
}

/// The largest answer body read (a larger one is a broken server, not a benchmark).
pub(super) const MAX_BODY: usize = 16 * 1024 * 1024;

/// One HTTP answer.
#[derive(Debug)]
pub(super) struct HttpAnswer {
    pub(super) status: u16,
    /// `Mcp-Session-Id`.
    pub(super) session: Option<String>,
    /// The body is `text/event-stream`.
    pub(super) event_stream: bool,
    pub(super) body: Vec<u8>,
}

/// Why a request got no answer.
#[derive(Debug)]
pub(super) enum HttpError {
    /// The server closed the connection before answering: it never took the request, so it
    /// may be sent again on a new connection (a closed keep-alive connection is normal HTTP).
    NotTaken,
    /// Anything else: the connection is unusable and the request's fate unknown.
    Broken(anyhow::Error),
}

impl From<std::io::Error> for HttpError {
    fn from(e: std::io::Error) -> Self {
        HttpError::Broken(e.into())
    }
}

/// One keep-alive HTTP/1.1 connection.
pub(super) struct HttpConn {
    stream: BufReader<TcpStream>,
    /// The server said `Connection: close`, or ended a body with the connection.
    pub(super) closed: bool,
}

impl HttpConn {
    pub(super) async fn connect(addr: &str) -> Result<HttpConn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        Ok(HttpConn {
            stream: BufReader::new(stream),
            closed: false,
        })
    }

    /// Sends one request and reads its answer.
    pub(super) async fn exchange(
        &mut self,
        target: &Target,
        method: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<HttpAnswer, HttpError> {
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            target.path,
            target.authority,
            body.len()
        );
        if let Some(token) = &target.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        // A write that fails, or an end before any answer byte, means the server never took
        // this request.
        if self
            .stream
            .get_mut()
            .write_all(head.as_bytes())
            .await
            .is_err()
        {
            return Err(HttpError::NotTaken);
        }
        let mut line = String::new();
        if self.stream.read_line(&mut line).await.unwrap_or(0) == 0 {
            return Err(HttpError::NotTaken);
        }
        let status: u16 = match line.split(' ').nth(1).and_then(|s| s.parse().ok()) {
            Some(s) => s,
            None => {
                return Err(HttpError::Broken(anyhow::anyhow!(
                    "no HTTP status line: {:?}",
                    line.trim_end()
                )));
            }
        };
        let mut length = None;
        let mut chunked = false;
        let mut session = None;
        let mut event_stream = false;
        loop {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                return Err(HttpError::Broken(anyhow::anyhow!(
                    "the server closed the connection mid-answer"
                )));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
                "connection" => self.closed |= v.eq_ignore_ascii_case("close"),
                "content-type" => {
                    event_stream = v.to_ascii_lowercase().starts_with("text/event-stream")
                }
                "mcp-session-id" => session = Some(v.to_owned()),
                _ => {}
            }
        }
        let body = if chunked {
            self.read_chunked().await?
        } else if let Some(n) = length {
            if n > MAX_BODY {
                return Err(HttpError::Broken(anyhow::anyhow!(
                    "an answer of {n} bytes (at most {MAX_BODY} are read)"
                )));
            }
            let mut body = vec![0; n];
            self.stream.read_exact(&mut body).await?;
            body
        } else if status == 204 || status == 304 || (100..200).contains(&status) {
            Vec::new()
        } else {
            // A body that ends with the connection.
            self.closed = true;
            let mut body = Vec::new();
            (&mut self.stream)
                .take(MAX_BODY as u64 + 1)
                .read_to_end(&mut body)
                .await?;
            body
        };
        if body.len() > MAX_BODY {
            return Err(HttpError::Broken(anyhow::anyhow!(
                "an answer of more than {MAX_BODY} bytes"
            )));
        }
        Ok(HttpAnswer {
            status,
            session,
            event_stream,
            body,
        })
    }

    /// A chunked body, to its last chunk and trailers.
    async fn read_chunked(&mut self) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                return Err(HttpError::Broken(anyhow::anyhow!(
                    "the server closed the connection mid-chunk"
                )));
            }
            let size = line.trim().split(';').next().unwrap_or_default();
            let n = usize::from_str_radix(size, 16).map_err(|_| {
                HttpError::Broken(anyhow::anyhow!("bad chunk size {:?}", line.trim_end()))
            })?;
            if n == 0 {
                // Trailers, up to the empty line.
                loop {
                    line.clear();
                    if self.stream.read_line(&mut line).await? == 0 || line.trim_end().is_empty() {
                        return Ok(body);
                    }
                }
            }
            if body.len() + n > MAX_BODY {
                return Err(HttpError::Broken(anyhow::anyhow!(
                    "an answer of more than {MAX_BODY} bytes"
                )));
            }
            let start = body.len();
            body.resize(start + n + 2, 0);
            self.stream.read_exact(&mut body[start..]).await?;
            body.truncate(start + n);
        }
    }
}

/// The start of a body, for an error message.
pub(super) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None if text.is_empty() => "(no body)".to_owned(),
        None => text.to_owned(),
    }
}

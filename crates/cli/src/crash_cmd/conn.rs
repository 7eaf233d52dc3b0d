//! One endpoint connection of the crash test: a bearer token of its choice (the operator's or
//! a runtime's), typed requests and answers of `openphone_protocol::endpoint`, events ignored.
//! Any transport failure is an error: the daemon was killed.

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use openphone_protocol::endpoint::{
    ClientInfo, EndpointErrorCode, Hello, HelloParams, Method, Request, RequestId, ServerMessage,
    VersionRange,
};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

/// The answer to one call: its result, or the daemon's JSON-RPC error code.
pub enum Answer<R> {
    Result(R),
    Refused(EndpointErrorCode),
}

pub struct Conn {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

impl Conn {
    /// Connects to `url` with `token` and says hello.
    pub async fn open(url: &str, token: &str) -> Result<Conn> {
        let mut req = url.into_client_request().context("bad endpoint url")?;
        req.headers_mut().insert(
            "Authorization",
            format!("Bearer {token}").parse().context("bad token")?,
        );
        let (ws, _) = connect_async(req).await.context("connecting")?;
        let mut conn = Conn { ws, next_id: 0 };
        let hello = HelloParams {
            protocol: VersionRange {
                min: openphone_protocol::MIN_VERSION,
                max: openphone_protocol::MAX_VERSION,
            },
            client: ClientInfo {
                name: "openphone-crash-test".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            token: None,
        };
        match conn.call::<Hello>(hello).await? {
            Answer::Result(_) => Ok(conn),
            Answer::Refused(code) => bail!("hello refused: {code}"),
        }
    }

    /// Sends one request and waits for its answer, skipping events.
    pub async fn call<M: Method>(&mut self, params: M::Params) -> Result<Answer<M::Result>> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = serde_json::to_string(&Request::new::<M>(id, params))?;
        self.ws
            .send(Message::text(frame))
            .await
            .context("sending")?;
        let ours = RequestId::from(id);
        loop {
            let Some(msg) = self.ws.next().await else {
                bail!("the daemon closed the connection");
            };
            let text = match msg.context("reading")? {
                Message::Text(t) => t,
                Message::Close(_) => bail!("the daemon closed the connection"),
                Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                    continue;
                }
            };
            match ServerMessage::parse(text.as_str()).context("an unexpected frame")? {
                ServerMessage::Response(r) if r.id == ours => {
                    return Ok(Answer::Result(r.result_as::<M>()?));
                }
                ServerMessage::Error(e) if e.id.as_ref() == Some(&ours) => {
                    return Ok(Answer::Refused(e.error.data.code));
                }
                ServerMessage::Response(_) | ServerMessage::Error(_) | ServerMessage::Event(_) => {}
            }
        }
    }
}

//! The dashboard's HTTP side against a real daemon: the one-time code exchange, the cookie's
//! flags, the session's token handed out only in the login answer, refusals (no cookie, the
//! cookie without the token, foreign Host or Origin, missing Origin, missing or wrong token),
//! the page's WebSocket as the operator endpoint, and logout closing it.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::support::{
    RUNTIME_TOKEN, Reply, Running, config, connect, error_code, http_request, start,
};

/// One HTTP/1.1 request on its own connection; `Host` is the daemon's unless given.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    http_request(addr, method, path, headers, body.as_bytes()).await
}

/// A one-time code from `dashboard.login` over the operator's endpoint.
async fn login_code(running: &Running) -> Value {
    let mut op = connect(&running.url(), Some(&running.operator_token()))
        .await
        .unwrap();
    op.hello().await;
    let r = op.call("dashboard.login", json!({})).await;
    r["result"].clone()
}

/// Exchanges a fresh code: `(cookie header value, the session's token)`; the token comes only
/// in the login answer's body.
async fn log_in(running: &Running) -> (String, String) {
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");
    let code = login_code(running).await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = json!({ "code": code }).to_string();
    let r = http(
        addr,
        "POST",
        "/ui/login",
        &[("Origin", &origin), ("Content-Type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let set = r.header("set-cookie").unwrap();
    let cookie = set.split(';').next().unwrap().to_owned();
    let token = r.json()["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 64);
    assert!(!set.contains(&token), "the token is never in a cookie");
    let s = http(
        addr,
        "GET",
        "/ui/api/session",
        &[("Cookie", &cookie), ("X-OpenPhone-CSRF", &token)],
        "",
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.body);
    (cookie, token)
}

#[tokio::test]
async fn a_one_time_code_buys_a_strict_httponly_session_cookie() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");

    // Only the operator mints codes.
    let mut rt = connect(&running.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let refused = rt.call("dashboard.login", json!({})).await;
    assert_eq!(error_code(&refused).1, "forbidden");

    let login = login_code(&running).await;
    let code = login["code"].as_str().unwrap().to_owned();
    assert_eq!(code.len(), 64);
    assert_eq!(login["login_path"], format!("/ui/login#code={code}"));
    let body = json!({ "code": code }).to_string();
    let as_json = ("Content-Type", "application/json");

    // Without a session nothing is served but the login page.
    let page = http(addr, "GET", "/ui/", &[], "").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/ui/login"));
    assert_eq!(
        http(addr, "GET", "/ui/api/session", &[], "").await.status,
        401
    );
    let login_page = http(addr, "GET", "/ui/login", &[], "").await;
    assert_eq!(login_page.status, 200);
    assert!(
        login_page
            .header("content-security-policy")
            .unwrap()
            .contains("frame-ancestors 'none'")
    );

    // The exchange needs an Origin, a loopback one, a loopback Host and the right code.
    let no_origin = http(addr, "POST", "/ui/login", &[as_json], &body).await;
    assert_eq!(no_origin.status, 403);
    let foreign = [("Origin", "https://evil.example"), as_json];
    assert_eq!(
        http(addr, "POST", "/ui/login", &foreign, &body)
            .await
            .status,
        403
    );
    let rebound = [
        ("Origin", origin.as_str()),
        ("Host", "evil.example"),
        as_json,
    ];
    assert_eq!(
        http(addr, "POST", "/ui/login", &rebound, &body)
            .await
            .status,
        403
    );
    let good = [("Origin", origin.as_str()), as_json];
    let wrong = json!({ "code": "0".repeat(64) }).to_string();
    assert_eq!(
        http(addr, "POST", "/ui/login", &good, &wrong).await.status,
        401
    );

    let ok = http(addr, "POST", "/ui/login", &good, &body).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let set = ok.header("set-cookie").unwrap().to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age="] {
        assert!(set.contains(flag), "{flag} missing from {set}");
    }
    assert!(!set.contains(&code), "the cookie is not the code");
    let token = ok.json()["token"].as_str().unwrap().to_owned();
    assert!(!set.contains(&token), "the cookie is not the token");
    // The code worked once.
    assert_eq!(
        http(addr, "POST", "/ui/login", &good, &body).await.status,
        401
    );

    let cookie = set.split(';').next().unwrap().to_owned();
    let with_cookie = [("Cookie", cookie.as_str())];
    assert_eq!(
        http(addr, "GET", "/ui/api/methods", &with_cookie, "")
            .await
            .status,
        403,
        "the API needs the token besides the cookie"
    );
    let with_token = [("Cookie", cookie.as_str()), ("X-OpenPhone-CSRF", &token)];
    let methods = http(addr, "GET", "/ui/api/methods", &with_token, "").await;
    assert_eq!(methods.status, 200);
    assert!(
        methods.json()["methods"]
            .as_array()
            .unwrap()
            .contains(&json!("jobs.list"))
    );
    let page = http(addr, "GET", "/ui/", &with_cookie, "").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("/ui/assets/app.js"));
    assert!(!page.body.contains(&token), "the page embeds no token");
    // The cookie does not help a foreign page or a rebound host name.
    let foreign = [
        ("Cookie", cookie.as_str()),
        ("X-OpenPhone-CSRF", &token),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(
        http(addr, "GET", "/ui/api/methods", &foreign, "")
            .await
            .status,
        403
    );
    let rebound = [
        ("Cookie", cookie.as_str()),
        ("X-OpenPhone-CSRF", &token),
        ("Host", "evil.example:80"),
    ];
    assert_eq!(
        http(addr, "GET", "/ui/api/methods", &rebound, "")
            .await
            .status,
        403
    );
    // A forged cookie is no session.
    let forged = [
        ("Cookie", "openphone_dashboard=0000"),
        ("X-OpenPhone-CSRF", &token),
    ];
    assert_eq!(
        http(addr, "GET", "/ui/api/session", &forged, "")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn state_changes_need_the_origin_and_the_csrf_token() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");
    let (cookie, csrf) = log_in(&running).await;
    let post = |headers: Vec<(&'static str, String)>| async move {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        http(addr, "POST", "/ui/api/audit/verify", &h, "{}").await
    };
    let c = || ("Cookie", cookie.clone());
    let o = || ("Origin", origin.clone());
    let j = || ("Content-Type", "application/json".to_owned());
    let right = || ("X-OpenPhone-CSRF", csrf.clone());
    // No CSRF token, a wrong one, or no Origin: refused.
    assert_eq!(post(vec![c(), o(), j()]).await.status, 403);
    let wrong = ("X-OpenPhone-CSRF", "f".repeat(64));
    assert_eq!(post(vec![c(), o(), j(), wrong]).await.status, 403);
    assert_eq!(post(vec![c(), j(), right()]).await.status, 403);
    // Without the cookie the token alone is nothing.
    assert_eq!(post(vec![o(), j(), right()]).await.status, 401);
    let ok = post(vec![c(), o(), j(), right()]).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["intact"], true);

    // Logout the same way; afterwards the cookie is dead and deleted.
    let h = [
        ("Cookie", cookie.as_str()),
        ("Origin", origin.as_str()),
        ("X-OpenPhone-CSRF", csrf.as_str()),
    ];
    let out = http(addr, "POST", "/ui/logout", &h[..2], "").await;
    assert_eq!(out.status, 403, "logout needs the CSRF token");
    let out = http(addr, "POST", "/ui/logout", &h, "").await;
    assert_eq!(out.status, 200);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = http(addr, "GET", "/ui/api/session", &[h[0], h[2]], "").await;
    assert_eq!(after.status, 401);
}

/// Issue 28, item 1 (second round): cookies are not separated by port, so the browser sends
/// the dashboard's cookie to `http://127.0.0.1:<any port>/ui/…` — another local web server
/// receives it as soon as its own page fetches `/ui/x`. From a non-browser client (no
/// `Origin`, no `Sec-Fetch-*`) that server then read the session's token from
/// `/ui/api/session` and opened `/ui/ws` with a forged own `Origin` and the token: operator.
/// Now the token comes only in the login answer (the page keeps it in its origin's
/// `localStorage`) and every route but the static page needs it besides the cookie.
#[tokio::test]
async fn a_leaked_dashboard_cookie_alone_cannot_get_the_token_or_the_socket() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let own = format!("http://{addr}");
    let (cookie, token) = log_in(&running).await;

    // What the other server has: the cookie, and nothing else.
    let only_cookie = [("Cookie", cookie.as_str())];
    for path in ["/ui/api/session", "/ui/api/methods"] {
        let r = http(addr, "GET", path, &only_cookie, "").await;
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(!r.body.contains(&token), "{path} gave the token away");
        let guessed = [
            ("Cookie", cookie.as_str()),
            ("X-OpenPhone-CSRF", &"0".repeat(64)),
        ];
        let r = http(addr, "GET", path, &guessed, "").await;
        assert_eq!(r.status, 403, "{path} with a guessed token: {}", r.body);
    }
    // The page itself is served on the cookie, and holds nothing secret.
    for path in [
        "/ui/",
        "/ui/login",
        "/ui/assets/app.js",
        "/ui/assets/rpc.js",
        "/ui/assets/login.js",
    ] {
        let r = http(addr, "GET", path, &only_cookie, "").await;
        assert_eq!(r.status, 200, "{path}");
        assert!(!r.body.contains(&token), "{path} embeds the token");
    }
    // Its state changes are refused too, with a forged own Origin.
    for path in ["/ui/api/audit/verify", "/ui/logout"] {
        let h = [
            ("Cookie", cookie.as_str()),
            ("Origin", own.as_str()),
            ("Content-Type", "application/json"),
        ];
        let r = http(addr, "POST", path, &h, "{}").await;
        assert_eq!(r.status, 403, "{path}: {}", r.body);
    }
    // The socket with a forged own Origin, without the token or with a guessed one: refused.
    let ws_url = format!("ws://{addr}/ui/ws");
    let guessed = socket_protocols(&"0".repeat(64));
    let offers = [None, Some("openphone-dashboard"), Some(guessed.as_str())];
    assert_socket_refused(&ws_url, Some(&cookie), Some(&own), &offers).await;

    // The holder of the token from the login answer (the dashboard's own page): the session
    // answers, without ever repeating the token, and the socket is the operator's.
    let h = [("Cookie", cookie.as_str()), ("X-OpenPhone-CSRF", &token)];
    let s = http(addr, "GET", "/ui/api/session", &h, "").await;
    assert_eq!(s.status, 200, "{}", s.body);
    assert!(s.json()["expires_at_ms"].as_i64().is_some(), "{}", s.body);
    assert!(
        !s.body.contains(&token),
        "the session route repeats the token"
    );
    let (ws, _) = page_socket(
        &ws_url,
        Some(&cookie),
        Some(&own),
        Some(&socket_protocols(&token)),
    )
    .await;
    let mut page = super::support::Client::from_stream(ws);
    assert_eq!(page.hello().await["role"], "operator");
    let list = page.call("confirmations.list", json!({})).await;
    assert_eq!(list["result"]["confirmations"], json!([]), "{list}");
}

/// The subprotocols the dashboard's page offers on `/ui/ws`: its name and the session's token.
fn socket_protocols(csrf: &str) -> String {
    format!("openphone-dashboard, openphone-csrf.{csrf}")
}

/// A `/ui/ws` upgrade request with these optional headers.
/// Opens the page's socket at `url` with this cookie, Origin and offered subprotocols, and
/// expects the upgrade to be accepted.
async fn page_socket(
    url: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    protocols: Option<&str>,
) -> (
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::handshake::client::Response,
) {
    tokio_tungstenite::connect_async(upgrade_request(url, cookie, origin, protocols))
        .await
        .unwrap()
}

/// Expects the page's socket at `url` with this cookie and Origin to be refused with 403,
/// before any method can run, for each of the offered subprotocol lists in `offers`.
async fn assert_socket_refused(
    url: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    offers: &[Option<&str>],
) {
    for offered in offers {
        let r =
            tokio_tungstenite::connect_async(upgrade_request(url, cookie, origin, *offered)).await;
        assert_eq!(
            refused_status(r),
            403,
            "Origin {origin:?}, offered {offered:?}"
        );
    }
}

fn upgrade_request(
    url: &str,
    cookie: Option<&str>,
    origin: Option<&str>,
    protocols: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut req = url.into_client_request().unwrap();
    for (name, value) in [
        ("Cookie", cookie),
        ("Origin", origin),
        ("Sec-WebSocket-Protocol", protocols),
    ] {
        if let Some(v) = value {
            req.headers_mut().insert(name, v.parse().unwrap());
        }
    }
    req
}

/// The HTTP status of a refused upgrade (panics when it was accepted).
fn refused_status(
    r: Result<
        (
            tokio_tungstenite::WebSocketStream<
                tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
            >,
            tokio_tungstenite::tungstenite::handshake::client::Response,
        ),
        tokio_tungstenite::tungstenite::Error,
    >,
) -> u16 {
    match r {
        Ok(_) => panic!("the upgrade was accepted"),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => r.status().as_u16(),
        Err(other) => panic!("{other}"),
    }
}

/// Issue 28, item 1: `/ui/ws` accepted an `Origin` that was loopback on *any* port and needed
/// no token beyond the cookie. `SameSite=Strict` does not separate ports, so a page served by
/// any other local web server opened the socket with the user's cookie, got `role=operator`,
/// approved pending calls and minted login codes. Now the upgrade must come from the
/// dashboard's own origin and offer the session's token; otherwise it is refused before any
/// method can run.
#[tokio::test]
async fn a_page_on_another_loopback_port_cannot_open_the_operator_socket() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let own = format!("http://{addr}");
    let (cookie, csrf) = log_in(&running).await;
    let ws_url = format!("ws://{addr}/ui/ws");
    let protocols = socket_protocols(&csrf);
    // Another local web server's page: the same site, another port.
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_port = other.local_addr().unwrap().port();
    for foreign in [
        format!("http://127.0.0.1:{other_port}"),
        format!("http://localhost:{other_port}"),
        format!("http://localhost:{}", addr.port()),
        format!("https://127.0.0.1:{}", addr.port()),
        "http://127.0.0.1".to_owned(),
    ] {
        // Even with the token (which such a page cannot read anyway).
        assert_socket_refused(&ws_url, Some(&cookie), Some(&foreign), &[Some(&protocols)]).await;
        // Its reads are refused too.
        let h = [
            ("Cookie", cookie.as_str()),
            ("X-OpenPhone-CSRF", csrf.as_str()),
            ("Origin", foreign.as_str()),
        ];
        let read = http(addr, "GET", "/ui/api/session", &h, "").await;
        assert_eq!(read.status, 403, "{foreign}: {}", read.body);
    }
    // A request the browser marks as coming from another origin of this site, without an
    // Origin (an <img> or <script>): refused.
    let h = [
        ("Cookie", cookie.as_str()),
        ("X-OpenPhone-CSRF", csrf.as_str()),
        ("Sec-Fetch-Site", "same-site"),
    ];
    assert_eq!(
        http(addr, "GET", "/ui/api/session", &h, "").await.status,
        403
    );

    // The own origin without the session's token: refused before any method runs.
    let offers = [
        None,
        Some("openphone-dashboard"),
        Some("openphone-csrf.0000"),
    ];
    assert_socket_refused(&ws_url, Some(&cookie), Some(&own), &offers).await;
    // No login code was minted and nothing was resolved by any of those.
    let mut op = connect(&running.url(), Some(&running.operator_token()))
        .await
        .unwrap();
    op.hello().await;

    // The own origin with the token: the operator endpoint, and it answers with the
    // dashboard's protocol, never the token.
    let (ws, response) = page_socket(&ws_url, Some(&cookie), Some(&own), Some(&protocols)).await;
    assert_eq!(
        response
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok()),
        Some("openphone-dashboard")
    );
    let mut page = super::support::Client::from_stream(ws);
    assert_eq!(page.hello().await["role"], "operator");
    let list = page.call("confirmations.list", json!({})).await;
    assert_eq!(list["result"]["confirmations"], json!([]), "{list}");
    // `localhost` with the daemon's port is the same daemon's own origin too.
    let local_url = format!("ws://localhost:{}/ui/ws", addr.port());
    let local_origin = format!("http://localhost:{}", addr.port());
    let (ws, _) = page_socket(
        &local_url,
        Some(&cookie),
        Some(&local_origin),
        Some(&protocols),
    )
    .await;
    let mut page = super::support::Client::from_stream(ws);
    assert_eq!(page.hello().await["role"], "operator");
}

#[tokio::test]
async fn the_page_socket_is_the_operator_endpoint_and_logout_closes_it() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");
    let (cookie, csrf) = log_in(&running).await;
    let ws_url = format!("ws://{addr}/ui/ws");
    let protocols = socket_protocols(&csrf);
    let upgrade = |cookie: Option<&str>, origin: Option<&str>| {
        upgrade_request(&ws_url, cookie, origin, Some(&protocols))
    };
    let refused = tokio_tungstenite::connect_async(upgrade(None, Some(&origin))).await;
    assert_eq!(refused_status(refused), 401);
    let refused =
        tokio_tungstenite::connect_async(upgrade(Some(&cookie), Some("http://evil.example"))).await;
    assert_eq!(refused_status(refused), 403);
    let refused = tokio_tungstenite::connect_async(upgrade(Some(&cookie), None)).await;
    assert_eq!(refused_status(refused), 403);

    let (ws, _) = tokio_tungstenite::connect_async(upgrade(Some(&cookie), Some(&origin)))
        .await
        .unwrap();
    let mut page = super::support::Client::from_stream(ws);
    let hello = page.hello().await;
    assert_eq!(hello["role"], "operator");
    let list = page.call("confirmations.list", json!({})).await;
    assert_eq!(list["result"]["confirmations"], json!([]));

    let h = [
        ("Cookie", cookie.as_str()),
        ("Origin", origin.as_str()),
        ("X-OpenPhone-CSRF", csrf.as_str()),
    ];
    assert_eq!(http(addr, "POST", "/ui/logout", &h, "").await.status, 200);
    assert_eq!(page.close_code().await, Some(1008));
}

/// Issue 28, item 10: the `Host` header was copied into the dashboard's
/// `Content-Security-Policy` (`connect-src 'self' ws://<Host>`), and a `Host` such as
/// `[::1]:<port> 'unsafe-inline'` passed the loopback check, so a request could write its own
/// policy. Now a `Host` that is not exactly a loopback name and this port is refused, and the
/// policy is built from the validated parts.
#[tokio::test]
async fn the_host_header_is_never_echoed_into_the_csp() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let port = addr.port();
    for host in [
        format!("[::1]:{port} 'unsafe-inline' https://evil.example"),
        format!("127.0.0.1:{port};script-src *"),
        format!("[::1]x:{port}"),
        // The right name on another port is not this daemon's origin.
        format!("127.0.0.1:{}", port.wrapping_add(1)),
    ] {
        let r = http(addr, "GET", "/ui/login", &[("Host", &host)], "").await;
        assert_eq!(r.status, 403, "{host}: {}", r.body);
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("evil"),
            "{csp}"
        );
    }
    for (host, connect) in [
        (
            format!("127.0.0.1:{port}"),
            format!("ws://127.0.0.1:{port};"),
        ),
        (
            format!("LOCALHOST:{port}"),
            format!("ws://localhost:{port};"),
        ),
    ] {
        let r = http(addr, "GET", "/ui/login", &[("Host", &host)], "").await;
        assert_eq!(r.status, 200, "{host}");
        let csp = r.header("content-security-policy").unwrap();
        assert!(
            csp.contains(&format!("connect-src 'self' {connect}")),
            "{host}: {csp}"
        );
    }
}

/// One request on a kept-alive connection: `(status, head, body)`; the connection stays open.
async fn keep_alive_request(
    stream: &mut tokio::net::TcpStream,
    addr: SocketAddr,
    head: &str,
    body: &str,
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!(
        "{head}\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the answer was complete");
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let Some((head, rest)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().unwrap())
            })
            .unwrap_or(0);
        if rest.len() >= length {
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            return (status, head.to_owned(), rest.to_owned());
        }
    }
}

/// Issue 28, item 1 (low): a request with the dashboard's cookie alone counted its connection
/// as the operator's, so whoever held the leaked cookie (another local web server) filled the
/// operator's places with kept-alive connections and the operator's own CLI was refused (503).
/// Now a connection counts as the operator's only after the token check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_cookie_alone_takes_no_place_of_the_operators() {
    // 7 authenticated places, 1 kept for runtimes and 1 for MCP hosts: 5 for the operator.
    let running = start(config(
        "[limits]\nmax_connections = 8\nmax_unauthenticated = 1\nreserved_per_class = 1\n\
         hello_timeout_ms = 600000\nheader_read_timeout_ms = 600000\n",
    ))
    .await;
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");
    // The operator's CLI (one place) mints a code; the login's connection stays open (two).
    let mut op = connect(&running.url(), Some(&running.operator_token()))
        .await
        .unwrap();
    op.hello().await;
    let code = op.call("dashboard.login", json!({})).await["result"]["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut login = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (status, head, answer) = keep_alive_request(
        &mut login,
        addr,
        &format!("POST /ui/login HTTP/1.1\r\nOrigin: {origin}\r\nContent-Type: application/json"),
        &json!({ "code": code }).to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let cookie = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("set-cookie")
                .then(|| v.trim().split(';').next().unwrap().to_owned())
        })
        .unwrap();
    // Whoever holds the cookie alone keeps three connections open on the page and the API.
    let mut held = Vec::new();
    for path in ["/ui/", "/ui/api/session", "/ui/api/methods"] {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (status, _, _) = keep_alive_request(
            &mut s,
            addr,
            &format!("GET {path} HTTP/1.1\r\nCookie: {cookie}"),
            "",
        )
        .await;
        assert!(status == 200 || status == 403, "{path}: {status}");
        held.push(s);
    }
    // The operator still gets in.
    let mut again = connect(&running.url(), Some(&running.operator_token()))
        .await
        .expect("the operator was refused: cookie-only connections took its places");
    assert_eq!(again.hello().await["role"], "operator");
    drop((held, login, op));
}

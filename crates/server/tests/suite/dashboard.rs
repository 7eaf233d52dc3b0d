//! The dashboard's HTTP side against a real daemon: the one-time code exchange, the cookie's
//! flags, refusals (no cookie, foreign Host or Origin, missing Origin, missing or wrong CSRF
//! token), the page's WebSocket as the operator endpoint, and logout closing it.

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

/// Exchanges a fresh code: `(cookie header value, csrf token)`.
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
    let s = http(addr, "GET", "/ui/api/session", &[("Cookie", &cookie)], "").await;
    assert_eq!(s.status, 200, "{}", s.body);
    (cookie, s.json()["csrf"].as_str().unwrap().to_owned())
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
    // The code worked once.
    assert_eq!(
        http(addr, "POST", "/ui/login", &good, &body).await.status,
        401
    );

    let cookie = set.split(';').next().unwrap().to_owned();
    let with_cookie = [("Cookie", cookie.as_str())];
    let methods = http(addr, "GET", "/ui/api/methods", &with_cookie, "").await;
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
    // The cookie does not help a foreign page or a rebound host name.
    let foreign = [
        ("Cookie", cookie.as_str()),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(
        http(addr, "GET", "/ui/api/methods", &foreign, "")
            .await
            .status,
        403
    );
    let rebound = [("Cookie", cookie.as_str()), ("Host", "evil.example:80")];
    assert_eq!(
        http(addr, "GET", "/ui/api/methods", &rebound, "")
            .await
            .status,
        403
    );
    // A forged cookie is no session.
    let forged = [("Cookie", "openphone_dashboard=0000")];
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
    let after = http(addr, "GET", "/ui/api/session", &h[..1], "").await;
    assert_eq!(after.status, 401);
}

#[tokio::test]
async fn the_page_socket_is_the_operator_endpoint_and_logout_closes_it() {
    let running = start(config("")).await;
    let addr = running.daemon.addr();
    let origin = format!("http://{addr}");
    let (cookie, csrf) = log_in(&running).await;
    let ws_url = format!("ws://{addr}/ui/ws");
    let upgrade = |cookie: Option<&str>, origin: Option<&str>| {
        let mut req = ws_url.as_str().into_client_request().unwrap();
        if let Some(c) = cookie {
            req.headers_mut().insert("Cookie", c.parse().unwrap());
        }
        if let Some(o) = origin {
            req.headers_mut().insert("Origin", o.parse().unwrap());
        }
        req
    };
    let status = |e: tokio_tungstenite::tungstenite::Error| match e {
        tokio_tungstenite::tungstenite::Error::Http(r) => r.status().as_u16(),
        other => panic!("{other}"),
    };
    let refused = tokio_tungstenite::connect_async(upgrade(None, Some(&origin))).await;
    assert_eq!(status(refused.err().unwrap()), 401);
    let refused =
        tokio_tungstenite::connect_async(upgrade(Some(&cookie), Some("http://evil.example"))).await;
    assert_eq!(status(refused.err().unwrap()), 403);
    let refused = tokio_tungstenite::connect_async(upgrade(Some(&cookie), None)).await;
    assert_eq!(status(refused.err().unwrap()), 403);

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

//! The dashboard's static files, embedded in the binary: plain HTML, CSS and JavaScript
//! modules with no build step (nothing to install, nothing fetched at run time).

use axum::http::header;
use axum::response::{IntoResponse, Response};

pub const INDEX_HTML: &str = include_str!("assets/index.html");
pub const LOGIN_HTML: &str = include_str!("assets/login.html");

/// `(body, content type)` of an asset under `/ui/assets/`.
pub fn file(name: &str) -> Option<(&'static str, &'static str)> {
    const JS: &str = "text/javascript; charset=utf-8";
    Some(match name {
        "app.css" => (include_str!("assets/app.css"), "text/css; charset=utf-8"),
        "app.js" => (include_str!("assets/app.js"), JS),
        "rpc.js" => (include_str!("assets/rpc.js"), JS),
        "pages.js" => (include_str!("assets/pages.js"), JS),
        "goals.js" => (include_str!("assets/goals.js"), JS),
        "inbox.js" => (include_str!("assets/inbox.js"), JS),
        "fmt.js" => (include_str!("assets/fmt.js"), JS),
        "login.js" => (include_str!("assets/login.js"), JS),
        _ => return None,
    })
}

/// An HTML page.
pub fn html(body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

//! The HTTP sessions stay bounded (issue 11: 5,000 `initialize` calls kept 280 MB alive): the
//! session used least recently is closed when a new one would pass the cap.

use std::time::Duration;

use openphone_mcp::McpSessions;
use openphone_mcp::rmcp::transport::streamable_http_server::session::SessionManager;
use pretty_assertions::assert_eq;

#[tokio::test]
async fn many_sessions_keep_the_session_map_bounded() {
    let sessions = McpSessions::new(4, Duration::from_secs(300));
    let mut ids = Vec::new();
    let mut transports = Vec::new();
    for _ in 0..10 {
        let (id, transport) = sessions.create_session().await.unwrap();
        ids.push(id);
        transports.push(transport);
        assert!(sessions.len().await <= 4);
    }
    assert_eq!(sessions.len().await, 4);
    let mut open = Vec::new();
    for id in &ids {
        open.push(sessions.has_session(id).await.unwrap());
    }
    assert_eq!(
        open,
        [
            false, false, false, false, false, false, true, true, true, true
        ]
    );
    // Closing one makes room without evicting another.
    sessions.close_session(&ids[9]).await.unwrap();
    let (_, _transport) = sessions.create_session().await.unwrap();
    assert!(sessions.has_session(&ids[6]).await.unwrap());
    assert_eq!(sessions.len().await, 4);
}

//! The HTTP sessions stay bounded (issue 11: 5,000 `initialize` calls kept 280 MB alive) and
//! apart per principal (issue 28: one token holder's `initialize` calls closed other hosts'
//! sessions): a principal over its cap closes its own least recently used session, never
//! another principal's.

use std::time::Duration;

use openphone_mcp::rmcp::transport::streamable_http_server::session::SessionManager;
use openphone_mcp::{McpSessions, SessionsError, creating_as};
use pretty_assertions::assert_eq;

#[tokio::test]
async fn many_sessions_keep_the_session_map_bounded() {
    let sessions = McpSessions::new(4, 4, Duration::from_secs(300));
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

/// Issue 28, item 8: at the global cap the least recently used session was closed whoever
/// owned it, so one token holder opening sessions closed every other host's (404 after 16 s).
#[tokio::test]
async fn a_principal_over_its_cap_closes_only_its_own_sessions() {
    // 6 places in all, 3 per principal.
    let sessions = McpSessions::new(6, 3, Duration::from_secs(300));
    let mut keep = Vec::new();
    let (victim, t) = creating_as("token:b".into(), sessions.create_session())
        .await
        .unwrap();
    keep.push(t);
    let mut mine = Vec::new();
    for _ in 0..20 {
        let (id, t) = creating_as("token:a".into(), sessions.create_session())
            .await
            .unwrap();
        mine.push(id);
        keep.push(t);
    }
    // B's session (the least recently used of all) survives; A keeps its newest three.
    assert!(sessions.has_session(&victim).await.unwrap());
    let open: Vec<bool> = {
        let mut v = Vec::new();
        for id in &mine {
            v.push(sessions.has_session(id).await.unwrap());
        }
        v
    };
    assert_eq!(open.iter().filter(|o| **o).count(), 3);
    assert!(open[17] && open[18] && open[19]);

    // The places fill up (C and D take theirs); a principal holding none is refused, one
    // holding some closes its own oldest, and nobody else's session is touched.
    for who in ["token:c", "token:c"] {
        let (_, t) = creating_as(who.into(), sessions.create_session())
            .await
            .unwrap();
        keep.push(t);
    }
    assert_eq!(sessions.len().await, 6);
    let refused = creating_as("token:d".into(), sessions.create_session()).await;
    assert!(
        matches!(refused, Err(SessionsError::Full(6))),
        "{:?}",
        refused.err()
    );
    let (_, t) = creating_as("token:b".into(), sessions.create_session())
        .await
        .unwrap();
    keep.push(t);
    assert!(
        !sessions.has_session(&victim).await.unwrap(),
        "B made room with its own oldest"
    );
    assert!(sessions.has_session(&mine[19]).await.unwrap());
    assert_eq!(sessions.len().await, 6);
}

//! The phone's side of a review (`agent-jobs.md` §9.4): the Approve and Deny buttons of a
//! review's notification. One task reads the phone's event broadcast and queues each tap; the
//! other resolves them in order through the scheduler.

use std::time::Duration;

use openphone_device::DeviceEvent;
use openphone_jobs::Scheduler;
use openphone_jobs::delivery;
use tokio::sync::{broadcast, mpsc, watch};

/// The Approve and Deny buttons of a review's notification on the phone (§9.4): a tap
/// carries only the review id and the decision; the first one wins (§9.5). Only the phone's
/// own notification actions arrive here — no agent can press them.
///
/// Two tasks: [`read_taps`] only reads the phone's event broadcast and queues each tap (never
/// waiting for the store), and this one resolves the queued taps one after the other, in the
/// order they were tapped. The broadcast keeps a bounded number of events for a slow reader;
/// a reader that waited for each resolution (a store write and its fsync) could fall that far
/// behind while the phone's other events kept coming, and lose a tap (issue 34's note).
///
/// On shutdown the reader stops at once; the taps already queued are still resolved for at
/// most [`DRAIN_AFTER_SHUTDOWN`], one whole resolution at a time (one under way is never cut
/// off). A tap left then is not lost work: its review stays pending in the store, to be
/// decided after the restart, and the log says so.
pub(super) async fn review_taps(
    scheduler: Scheduler,
    taps: broadcast::Receiver<DeviceEvent>,
    shutdown: watch::Receiver<bool>,
) {
    let (queue, mut decisions) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_taps(taps, queue, shutdown.clone()));
    let mut stop = shutdown;
    let deadline = async move {
        crate::shutdown::stopped(&mut stop).await;
        tokio::time::sleep(DRAIN_AFTER_SHUTDOWN).await;
    };
    tokio::pin!(deadline);
    loop {
        let tap = tokio::select! {
            biased;
            tap = decisions.recv() => tap,
            () = &mut deadline => {
                if !decisions.is_empty() {
                    tracing::warn!(
                        left = decisions.len(),
                        "jobs: the daemon stopped before every review tapped on the phone was \
                         resolved; those reviews stay pending"
                    );
                }
                break;
            }
        };
        let Some(Tap {
            confirmation_id,
            approve,
        }) = tap
        else {
            break;
        };
        match scheduler.resolve_review(&confirmation_id, approve).await {
            Ok(answer) => tracing::info!(
                confirmation_id,
                code = answer.code.as_str(),
                "jobs: a review was decided on the phone"
            ),
            Err(e) => tracing::warn!(confirmation_id, error = %e, "jobs: a review tap failed"),
        }
    }
    if let Err(e) = reader.await {
        tracing::warn!(error = %e, "jobs: the reader of the phone's review taps failed");
    }
}

/// How long, once the daemon is told to stop, the taps already queued may still be resolved.
const DRAIN_AFTER_SHUTDOWN: Duration = Duration::from_secs(2);

/// A review's button tapped on the phone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tap {
    confirmation_id: String,
    approve: bool,
}

/// Reads the phone's events until shutdown (or the phone's broadcast closes) and queues every
/// tap on a review's Approve or Deny button, in order; other events are skipped.
async fn read_taps(
    mut taps: broadcast::Receiver<DeviceEvent>,
    queue: mpsc::UnboundedSender<Tap>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let event = tokio::select! {
            event = taps.recv() => event,
            () = crate::shutdown::stopped(&mut shutdown) => return,
        };
        let (key, action) = match event {
            Ok(DeviceEvent::NotificationAction { key, action, .. }) => (key, action),
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "jobs: the phone's events came faster than read");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(confirmation_id) = delivery::review_of_key(&key) else {
            continue;
        };
        let approve = match action.as_str() {
            "approve" => true,
            "deny" => false,
            other => {
                tracing::warn!(action = other, "jobs: an unknown review action was tapped");
                continue;
            }
        };
        let tap = Tap {
            confirmation_id: confirmation_id.to_owned(),
            approve,
        };
        if queue.send(tap).is_err() {
            // The resolver is gone: the daemon is stopping.
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(key: &str, action: &str) -> DeviceEvent {
        DeviceEvent::NotificationAction {
            key: key.to_owned(),
            action: action.to_owned(),
            at_ms: 0,
        }
    }

    fn other() -> DeviceEvent {
        tap("job-1-done", "open")
    }

    /// REGRESSION (issue 34's note): the reader awaited each review's resolution before reading
    /// the next event, so while one resolution waited for the store, the phone's other events
    /// could overrun the broadcast and take a later tap with them. Here nothing resolves the
    /// first tap at all, and the reader still takes in every event and queues the second tap.
    #[tokio::test(flavor = "current_thread")]
    async fn regression_a_tap_is_not_lost_while_an_earlier_review_is_still_resolving() {
        let (phone, taps) = broadcast::channel(4);
        let (queue, mut decisions) = mpsc::unbounded_channel();
        let (_stop, shutdown) = watch::channel(false);
        let reader = tokio::spawn(read_taps(taps, queue, shutdown));
        phone
            .send(tap("review-job-confirm-aaa", "approve"))
            .unwrap();
        tokio::task::yield_now().await;
        // The first tap is queued and nobody resolves it; the phone goes on: more events than
        // the broadcast holds, in rounds the reader keeps up with, the second tap among them.
        for round in 0..5 {
            for _ in 0..3 {
                phone.send(other()).unwrap();
            }
            if round == 2 {
                phone.send(tap("review-job-confirm-bbb", "deny")).unwrap();
            }
            tokio::task::yield_now().await;
        }
        let within = std::time::Duration::from_secs(5);
        let first = tokio::time::timeout(within, decisions.recv()).await;
        let second = tokio::time::timeout(within, decisions.recv()).await;
        let (first, second) = (
            first.expect("the first tap is queued").unwrap(),
            second.expect("the second tap is queued").unwrap(),
        );
        assert_eq!(
            (first, second),
            (
                Tap {
                    confirmation_id: "job-confirm-aaa".to_owned(),
                    approve: true
                },
                Tap {
                    confirmation_id: "job-confirm-bbb".to_owned(),
                    approve: false
                }
            )
        );
        assert!(
            decisions.try_recv().is_err(),
            "only the two taps are queued"
        );
        drop(phone);
        reader.await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn only_review_buttons_are_taps_and_an_unknown_action_is_skipped() {
        let (phone, taps) = broadcast::channel(16);
        let (queue, mut decisions) = mpsc::unbounded_channel();
        let (_stop, shutdown) = watch::channel(false);
        let reader = tokio::spawn(read_taps(taps, queue, shutdown));
        // Not a review's key, a key that only looks like one, an unknown action, then a tap.
        phone.send(tap("job-7-done", "approve")).unwrap();
        phone.send(tap("review-something-else", "approve")).unwrap();
        phone.send(tap("review-job-confirm-ccc", "maybe")).unwrap();
        phone.send(tap("review-job-confirm-ccc", "deny")).unwrap();
        drop(phone);
        reader.await.unwrap();
        assert_eq!(
            decisions.recv().await,
            Some(Tap {
                confirmation_id: "job-confirm-ccc".to_owned(),
                approve: false
            })
        );
        assert_eq!(
            decisions.recv().await,
            None,
            "the reader ended with the phone's channel"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_reader_stops_at_shutdown() {
        let (_phone, taps) = broadcast::channel::<DeviceEvent>(4);
        let (queue, _decisions) = mpsc::unbounded_channel();
        let (stop, shutdown) = watch::channel(false);
        let reader = tokio::spawn(read_taps(taps, queue, shutdown));
        stop.send(true).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), reader)
            .await
            .expect("the reader stops")
            .unwrap();
    }
}

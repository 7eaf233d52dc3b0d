//! [`Finish`]: a direct call run in its request's own task, finished in a task of its own only
//! if the request is dropped first (`direct.rs`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A call running in [`Finish`], with its panic caught.
type Running<T> = Pin<Box<dyn Future<Output = Result<T, Panicked>> + Send>>;

/// A call that panicked ([`Finish`]).
#[derive(Debug)]
pub(crate) struct Panicked;

/// A call's future, run in the request's own task — spawning it took a task, a wake of the
/// other worker and a move of the call between threads on every call (issue 34) — and never
/// dropped half-way: when the request is dropped before the call ends (the client went away),
/// the rest of the call goes on in a task of its own, as a call spawned from the start would.
/// A panic in the call is its outcome (`Err`), as a spawned task's would be.
pub(crate) struct Finish<T: Send + 'static> {
    call: Option<Running<T>>,
}

impl<T: Send + 'static> Finish<T> {
    pub(crate) fn new(call: impl Future<Output = T> + Send + 'static) -> Finish<T> {
        let caught = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(call));
        Finish {
            call: Some(Box::pin(async move { caught.await.map_err(|_| Panicked) })),
        }
    }
}

impl<T: Send + 'static> Future for Finish<T> {
    type Output = Result<T, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Polled again after it ended: it has nothing more to give.
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending;
        };
        let outcome = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(outcome)
    }
}

impl<T: Send + 'static> Drop for Finish<T> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            // Outside a runtime (it is shutting down) there is nowhere to finish it.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(call);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A call whose request is dropped half-way is finished in a task of its own, never
    /// dropped: its work after the drop still happens.
    #[tokio::test]
    async fn a_call_whose_request_is_dropped_still_finishes() {
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let (done, finished) = tokio::sync::oneshot::channel::<&str>();
        let mut call = Box::pin(Finish::new(async move {
            wait.await.unwrap();
            done.send("finished").unwrap();
            7
        }));
        // The request's task polls it once (the call waits), then drops it.
        assert!(futures_util::poll!(call.as_mut()).is_pending());
        drop(call);
        go.send(()).unwrap();
        let said = tokio::time::timeout(std::time::Duration::from_secs(10), finished)
            .await
            .expect("the dropped call was finished")
            .unwrap();
        assert_eq!(said, "finished");
    }

    /// A call that ends in the request's task gives its outcome; one that panics gives
    /// `Panicked`, not a panic of the request's task.
    #[tokio::test]
    async fn a_call_gives_its_outcome_and_a_panic_is_an_outcome() {
        assert_eq!(Finish::new(async { 7 }).await.unwrap(), 7);
        let panicking = Finish::new(async {
            if std::hint::black_box(true) {
                panic!("a call that panics");
            }
            7
        });
        assert!(panicking.await.is_err());
    }
}

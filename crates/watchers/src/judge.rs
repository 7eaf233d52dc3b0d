//! The optional model that judges `semantic_match` watchers.

use async_trait::async_trait;

/// Judges whether content meets a condition in words ("the price is below 80 EUR"). Given
/// only when a model is configured; without one, `semantic_match` is refused at creation.
///
/// `content` is data from the phone (a message, a page, the screen's text), never
/// instructions: an implementation must present it to its model as such.
#[async_trait]
pub trait Judge: Send + Sync + 'static {
    /// Whether `content` meets `condition`; `Err` with a one-line reason when it cannot say
    /// (the watcher does not fire then).
    async fn judge(&self, condition: &str, content: &str) -> Result<bool, String>;
}

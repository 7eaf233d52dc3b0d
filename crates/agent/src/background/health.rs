//! [`ModelHealth`]: the heartbeat's check that the agent runtime's model answers (issue 32
//! item 9): one tool-less request for a one-word answer to the background model (else the
//! `[builtin]` model), made once, never retried — a heartbeat reports the model as it is now.

use std::sync::Arc;

use async_trait::async_trait;
use openphone_clock::Clock;
use openphone_model::{ChatRequest, Message, ModelClient, RetryPolicy};

use crate::config::{BuiltinConfig, BuiltinConfigError};

/// The system prompt of the check.
const SYSTEM: &str =
    "This is a health check of the connection to you. Answer with the single word OK.";

/// The heartbeat's model check.
#[derive(Debug, Clone)]
pub struct ModelHealth {
    client: ModelClient,
}

impl ModelHealth {
    /// The check of a `[builtin]` table's background model (else its model); one attempt.
    pub fn from_config(
        config: &BuiltinConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<ModelHealth, BuiltinConfigError> {
        let mut model = config.background_model_config()?;
        model.retry = RetryPolicy::none();
        let client =
            ModelClient::with_clock(model, clock).map_err(|e| BuiltinConfigError(e.detail()))?;
        Ok(ModelHealth { client })
    }
}

#[async_trait]
impl openphone_jobs::maintenance::HealthProbe for ModelHealth {
    fn model(&self) -> String {
        self.client.config().model.clone()
    }

    async fn check(&self) -> Result<(), String> {
        let request = ChatRequest {
            messages: vec![Message::system(SYSTEM), Message::user("OK?")],
            tools: Vec::new(),
            tool_choice: None,
            max_tokens: Some(4),
        };
        self.client
            .complete(&request, &mut |_| {})
            .await
            .map(|_| ())
            .map_err(|e| e.detail())
    }
}

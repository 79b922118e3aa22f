//! What a model was asked and what it answered, kept beside the answer in
//! `<out>/<repo>/<id>/transcript.json`.
//!
//! One [`Transcript`] per instance; one [`SampleTranscript`] per sample (pass@k asks several);
//! one [`Attempt`] per model request (repair rounds and tool rounds each make one). A sample's
//! `messages` is the whole conversation as sent in its last request, followed by the last
//! reply: attempt *i* sent its first `messages_sent` messages (after the system prompt), so
//! every request can be rebuilt exactly. Each attempt keeps the raw response body, the tool
//! calls and what the tools returned, usage, cost, latency and every HTTP try (status, error,
//! backoff). API keys are never part of a request body, so none is ever written here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::HttpTry;

/// A tool call and what the tool returned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    pub result: String,
}

/// One model request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    /// Repair round (0 = the first question).
    pub round: u32,
    /// Messages of the conversation sent (after the system prompt).
    pub messages_sent: usize,
    /// Seconds since the Unix epoch when the request started.
    pub started_at: f64,
    /// Wall time of the request, HTTP retries and backoff included.
    pub seconds: f64,
    /// `ok` or `infra_error`.
    pub status: String,
    pub error: Option<String>,
    pub http: Vec<HttpTry>,
    /// The response body as received (`null` when none came).
    pub response: Value,
    /// The reply's text.
    pub text: String,
    pub stop_reason: Option<String>,
    pub tool_calls: Vec<ToolUse>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost: Option<f64>,
}

/// One sample (one independent answer).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SampleTranscript {
    /// 1-based.
    pub sample: u32,
    /// `ok`, `infra_error` or `unparseable`.
    pub status: String,
    pub error: Option<String>,
    pub answer: Option<Value>,
    pub messages: Vec<Value>,
    pub attempts: Vec<Attempt>,
}

/// `transcript.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Transcript {
    pub id: String,
    pub repository: String,
    pub model: String,
    pub api: String,
    pub base_url: String,
    /// `context`, `agent` or `context+tools`.
    pub mode: String,
    /// Temperature, output limit, reasoning settings as sent.
    pub params: Value,
    pub system: String,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    /// Source shown in the prompt (`file:ranges`) and targets located.
    pub context_files: Vec<String>,
    pub targets: Vec<String>,
    pub context_notes: Vec<String>,
    pub samples: Vec<SampleTranscript>,
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

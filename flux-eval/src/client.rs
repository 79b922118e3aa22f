//! Chat clients for the two wire protocols (OpenAI chat-completions, Anthropic messages), with
//! bounded retries and exponential backoff on 429, 5xx and timeouts (a reply cut by a timeout
//! while its body arrives included). `Retry-After` (seconds) is honoured, capped by
//! [`RetryPolicy::max_backoff`]. A connection that cannot be made (nothing listening at the base
//! URL) is not retried: the client remembers it ([`ChatClient::unreachable`]) and `flux eval`
//! stops at once instead of retrying every instance. A reply body larger than
//! [`MAX_REPLY_BYTES`] is refused, not read to its end.
//!
//! The API key is sent in a header and never appears in errors, logs or files.

use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The largest reply body read (bytes): a model's reply is text, and a server streaming without
/// end must not fill the memory.
pub const MAX_REPLY_BYTES: usize = 32 << 20;

/// Wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

impl std::str::FromStr for Api {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "openai" => Ok(Api::OpenAi),
            "anthropic" => Ok(Api::Anthropic),
            o => Err(format!("unknown api {o:?} (openai, anthropic)")),
        }
    }
}

impl Api {
    pub fn key_env(self) -> &'static str {
        match self {
            Api::OpenAi => "OPENAI_API_KEY",
            Api::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
        }
    }
}

/// Retry behaviour.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first try (so `max_retries + 1` requests at most).
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            initial_backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// Which field carries the output limit on the OpenAI protocol: OpenAI's own API wants
/// `max_completion_tokens` (reasoning models refuse `max_tokens`); vLLM, Ollama and llama.cpp
/// read `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

/// Sampling and reasoning settings of every request.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    /// `None`: not sent (the server's default; reasoning models accept only that).
    pub temperature: Option<f64>,
    /// Output limit; Anthropic requires one (default 8192 there), OpenAI-compatible servers get
    /// it only when set.
    pub max_tokens: Option<u32>,
    /// `None`: decided from the base URL (`max_completion_tokens` for api.openai.com).
    pub max_tokens_field: Option<MaxTokensField>,
    /// OpenAI `reasoning_effort` (`minimal`, `low`, `medium`, `high`).
    pub reasoning_effort: Option<String>,
    /// Anthropic extended thinking budget in tokens (`thinking.budget_tokens`).
    pub thinking_budget: Option<u32>,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            temperature: Some(0.0),
            max_tokens: None,
            max_tokens_field: None,
            reasoning_effort: None,
            thinking_budget: None,
        }
    }
}

impl GenParams {
    /// The settings as recorded in meta and transcripts.
    pub fn to_json(&self) -> Value {
        json!({
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            "thinking_budget": self.thinking_budget,
        })
    }

    /// Combinations the APIs refuse, found before any request.
    pub fn check(&self, api: Api) -> Result<(), String> {
        if let Some(t) = self.temperature {
            if !(0.0..=2.0).contains(&t) || !t.is_finite() {
                return Err(format!("temperature {t}: must be between 0 and 2"));
            }
        }
        match api {
            Api::Anthropic => {
                if self.reasoning_effort.is_some() {
                    return Err(
                        "--reasoning-effort is OpenAI's; for Anthropic use --thinking-budget"
                            .into(),
                    );
                }
                if let Some(b) = self.thinking_budget {
                    if b < 1024 {
                        return Err(format!(
                            "thinking budget {b}: Anthropic needs at least 1024 tokens"
                        ));
                    }
                    if self.temperature.is_some_and(|t| t != 1.0) {
                        return Err("Anthropic's extended thinking does not allow a temperature: pass --temperature default".into());
                    }
                    if self.max_tokens.is_some_and(|m| m <= b) {
                        return Err(format!(
                            "--max-tokens must exceed the thinking budget ({b})"
                        ));
                    }
                }
            }
            Api::OpenAi => {
                if self.thinking_budget.is_some() {
                    return Err("--thinking-budget is Anthropic's; for OpenAI-compatible servers use --reasoning-effort".into());
                }
            }
        }
        Ok(())
    }
}

/// A temperature on the wire: `0`, not `0.0`, when it is whole (as clients usually send it).
fn temperature(t: f64) -> Value {
    if t.fract() == 0.0 && t.abs() < 1e9 {
        json!(t as i64)
    } else {
        json!(t)
    }
}

/// One HTTP request of a completion (the first try or a retry).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HttpTry {
    /// HTTP status, when a response came.
    pub status: Option<u16>,
    /// What went wrong (a transport error or a non-success body), when something did.
    pub error: Option<String>,
    /// Time to the end of the response body.
    pub seconds: f64,
    /// Backoff slept after this try.
    pub backoff_seconds: f64,
}

/// One plain chat message.
#[derive(Debug, Clone)]
pub struct Message {
    /// `user` or `assistant`.
    pub role: &'static str,
    pub content: String,
}

impl Message {
    /// The message in wire form (the same for both protocols).
    pub fn to_value(&self) -> Value {
        json!({"role": self.role, "content": self.content})
    }
}

/// A function the model may call.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON schema of the arguments.
    pub parameters: Value,
}

/// A function call requested by the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Parsed arguments (`Value::Null` when the model sent unparseable arguments).
    pub arguments: Value,
}

/// A reply.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    pub text: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// HTTP requests that were retried for this completion.
    pub retries: u32,
    /// Function calls requested (tools mode).
    pub tool_calls: Vec<ToolCall>,
    /// The assistant message in wire form, to append to the conversation.
    pub assistant: Value,
    /// The response body as received.
    pub raw: Value,
    /// `finish_reason` / `stop_reason` (e.g. `length` when the output limit cut the reply).
    pub stop_reason: Option<String>,
    /// Every HTTP request made for this completion.
    pub http: Vec<HttpTry>,
    /// Wall time including retries and backoff.
    pub seconds: f64,
}

/// An infrastructure failure: not the model's answer, never scored as wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct InfraError {
    pub message: String,
    /// Requests made (the first try plus retries).
    pub requests: u32,
    /// Every HTTP request made.
    pub http: Vec<HttpTry>,
    pub seconds: f64,
}

/// A configured client.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    api: Api,
    base_url: String,
    model: String,
    key: Option<String>,
    max_tokens: u32,
    retry: RetryPolicy,
    params: GenParams,
    /// Set (shared by clones) once a connection could not be made: why.
    unreachable: Arc<OnceLock<String>>,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ChatClient {
    pub fn new(
        api: Api,
        base_url: &str,
        model: &str,
        key: Option<String>,
        max_tokens: u32,
        timeout: Duration,
        retry: RetryPolicy,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| format!("building the HTTP client: {e}"))?;
        Ok(ChatClient {
            http,
            api,
            base_url: {
                // Anthropic's path carries the version: accept a base given with or without it.
                let b = base_url.trim_end_matches('/');
                match api {
                    Api::Anthropic => b.strip_suffix("/v1").unwrap_or(b).to_string(),
                    Api::OpenAi => b.to_string(),
                }
            },
            model: model.to_string(),
            key,
            max_tokens,
            retry,
            params: GenParams::default(),
            unreachable: Arc::new(OnceLock::new()),
        })
    }

    /// Why the server cannot be reached, once a request found nothing listening at the base URL
    /// (shared by every clone of this client).
    pub fn unreachable(&self) -> Option<&str> {
        self.unreachable.get().map(String::as_str)
    }

    /// Use these sampling settings (temperature 0 and no output limit on OpenAI otherwise).
    pub fn with_params(mut self, params: GenParams) -> Self {
        if let Some(m) = params.max_tokens {
            self.max_tokens = m;
        }
        self.params = params;
        self
    }

    /// True when the base URL is the vendor's own API (which needs a key); any other server
    /// (vLLM, Ollama, llama.cpp, a proxy) may need none.
    pub fn is_vendor_url(api: Api, base_url: &str) -> bool {
        let host = base_url
            .split("://")
            .nth(1)
            .unwrap_or(base_url)
            .split(['/', ':'])
            .next()
            .unwrap_or("");
        match api {
            Api::OpenAi => host == "api.openai.com",
            Api::Anthropic => host == "api.anthropic.com",
        }
    }

    fn request(
        &self,
        system: &str,
        messages: &[Value],
        tools: &[ToolSpec],
    ) -> reqwest::RequestBuilder {
        match self.api {
            Api::OpenAi => {
                let mut all = Vec::new();
                if !system.is_empty() {
                    all.push(json!({"role": "system", "content": system}));
                }
                all.extend(messages.iter().cloned());
                let mut body = json!({"model": self.model, "messages": all});
                let p = &self.params;
                if let Some(t) = p.temperature {
                    body["temperature"] = temperature(t);
                }
                if let Some(m) = p.max_tokens {
                    let field = p.max_tokens_field.unwrap_or(
                        if Self::is_vendor_url(Api::OpenAi, &self.base_url) {
                            MaxTokensField::MaxCompletionTokens
                        } else {
                            MaxTokensField::MaxTokens
                        },
                    );
                    let k = match field {
                        MaxTokensField::MaxTokens => "max_tokens",
                        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
                    };
                    body[k] = json!(m);
                }
                if let Some(e) = &p.reasoning_effort {
                    body["reasoning_effort"] = json!(e);
                }
                if !tools.is_empty() {
                    body["tools"] = tools
                        .iter()
                        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                        .collect();
                }
                let mut rb = self
                    .http
                    .post(format!("{}/chat/completions", self.base_url))
                    .json(&body);
                if let Some(k) = &self.key {
                    rb = rb.bearer_auth(k);
                }
                rb
            }
            Api::Anthropic => {
                let mut body = json!({
                    "model": self.model,
                    "max_tokens": self.max_tokens,
                    "messages": messages,
                });
                if !system.is_empty() {
                    body["system"] = json!(system);
                }
                let p = &self.params;
                match p.thinking_budget {
                    Some(b) => body["thinking"] = json!({"type": "enabled", "budget_tokens": b}),
                    None => {
                        if let Some(t) = p.temperature {
                            body["temperature"] = temperature(t);
                        }
                    }
                }
                if !tools.is_empty() {
                    body["tools"] = tools
                        .iter()
                        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                        .collect();
                }
                let mut rb = self
                    .http
                    .post(format!("{}/v1/messages", self.base_url))
                    .header("anthropic-version", "2023-06-01")
                    .json(&body);
                if let Some(k) = &self.key {
                    rb = rb.header("x-api-key", k);
                }
                rb
            }
        }
    }

    /// The messages that answer tool calls, in wire form.
    pub fn tool_results(&self, results: &[(String, String)]) -> Vec<Value> {
        match self.api {
            Api::OpenAi => results
                .iter()
                .map(
                    |(id, content)| json!({"role": "tool", "tool_call_id": id, "content": content}),
                )
                .collect(),
            Api::Anthropic => vec![json!({
                "role": "user",
                "content": results
                    .iter()
                    .map(|(id, content)| json!({"type": "tool_result", "tool_use_id": id, "content": content}))
                    .collect::<Vec<_>>(),
            })],
        }
    }

    /// Tool results followed by a user text, in wire form (one user turn for Anthropic).
    pub fn tool_results_then(&self, results: &[(String, String)], text: &str) -> Vec<Value> {
        let mut out = self.tool_results(results);
        match (
            self.api,
            out.last_mut()
                .and_then(|m| m.get_mut("content"))
                .and_then(|c| c.as_array_mut()),
        ) {
            (Api::Anthropic, Some(blocks)) => blocks.push(json!({"type": "text", "text": text})),
            _ => out.push(json!({"role": "user", "content": text})),
        }
        out
    }

    fn parse(&self, v: &Value) -> Result<Completion, String> {
        let u = |a: &str, b: &str| {
            v.get("usage")
                .and_then(|u| u.get(a).or_else(|| u.get(b)))
                .and_then(|x| x.as_u64())
                .unwrap_or(0)
        };
        match self.api {
            Api::OpenAi => {
                let msg = v
                    .pointer("/choices/0/message")
                    .ok_or("response has no choices[0].message")?;
                let mut tool_calls = Vec::new();
                for (i, tc) in msg
                    .get("tool_calls")
                    .and_then(|t| t.as_array())
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    let args = tc.pointer("/function/arguments");
                    tool_calls.push(ToolCall {
                        id: tc
                            .get("id")
                            .and_then(|x| x.as_str())
                            .map(String::from)
                            .unwrap_or_else(|| format!("call_{i}")),
                        name: tc
                            .pointer("/function/name")
                            .and_then(|x| x.as_str())
                            .unwrap_or("")
                            .to_string(),
                        arguments: match args {
                            Some(Value::String(s)) => {
                                serde_json::from_str(s).unwrap_or(Value::Null)
                            }
                            Some(other) => other.clone(),
                            None => Value::Null,
                        },
                    });
                }
                let text = match msg.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None if !tool_calls.is_empty() => String::new(),
                    _ => return Err("response has no choices[0].message.content".into()),
                };
                let mut assistant = json!({"role": "assistant", "content": text});
                if let Some(tc) = msg.get("tool_calls").filter(|_| !tool_calls.is_empty()) {
                    assistant["tool_calls"] = tc.clone();
                }
                Ok(Completion {
                    text,
                    tokens_in: u("prompt_tokens", "input_tokens"),
                    tokens_out: u("completion_tokens", "output_tokens"),
                    tool_calls,
                    assistant,
                    raw: v.clone(),
                    stop_reason: v
                        .pointer("/choices/0/finish_reason")
                        .and_then(Value::as_str)
                        .map(String::from),
                    ..Default::default()
                })
            }
            Api::Anthropic => {
                let parts = v
                    .get("content")
                    .and_then(|c| c.as_array())
                    .ok_or("response has no content")?;
                let ty = |p: &Value| {
                    p.get("type")
                        .and_then(|t| t.as_str())
                        .unwrap_or("text")
                        .to_string()
                };
                let text: String = parts
                    .iter()
                    .filter(|p| ty(p) == "text")
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("");
                let tool_calls: Vec<ToolCall> = parts
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| ty(p) == "tool_use")
                    .map(|(i, p)| ToolCall {
                        id: p
                            .get("id")
                            .and_then(|x| x.as_str())
                            .map(String::from)
                            .unwrap_or_else(|| format!("toolu_{i}")),
                        name: p
                            .get("name")
                            .and_then(|x| x.as_str())
                            .unwrap_or("")
                            .to_string(),
                        arguments: p.get("input").cloned().unwrap_or(Value::Null),
                    })
                    .collect();
                if parts.is_empty() {
                    return Err("response content is empty".into());
                }
                Ok(Completion {
                    text,
                    tokens_in: u("input_tokens", "prompt_tokens"),
                    tokens_out: u("output_tokens", "completion_tokens"),
                    tool_calls,
                    assistant: json!({"role": "assistant", "content": parts}),
                    raw: v.clone(),
                    stop_reason: v
                        .get("stop_reason")
                        .and_then(Value::as_str)
                        .map(String::from),
                    ..Default::default()
                })
            }
        }
    }

    /// Send a plain conversation (no tools); see [`ChatClient::complete_with`].
    pub async fn complete(
        &self,
        system: &str,
        messages: &[Message],
    ) -> Result<Completion, InfraError> {
        let msgs: Vec<Value> = messages.iter().map(Message::to_value).collect();
        self.complete_with(system, &msgs, &[]).await
    }

    /// Send one conversation (messages in wire form, tools offered when not empty); retry
    /// transient failures. Every `Err` is an infrastructure error.
    pub async fn complete_with(
        &self,
        system: &str,
        messages: &[Value],
        tools: &[ToolSpec],
    ) -> Result<Completion, InfraError> {
        let mut attempt: u32 = 0;
        let t0 = std::time::Instant::now();
        let mut http: Vec<HttpTry> = Vec::new();
        loop {
            let tt = std::time::Instant::now();
            let (err, retry_after, status) =
                match self.request(system, messages, tools).send().await {
                    Ok(resp) => 'reply: {
                        let status = resp.status();
                        let retry_after = resp
                            .headers()
                            .get(reqwest::header::RETRY_AFTER)
                            .and_then(|h| h.to_str().ok())
                            .and_then(|s| s.trim().parse::<f64>().ok())
                            .filter(|s| s.is_finite() && *s >= 0.0)
                            .map(Duration::from_secs_f64);
                        let status_code = Some(status.as_u16());
                        let body = match read_capped(resp, MAX_REPLY_BYTES).await {
                            Ok(b) => b,
                            // Cut while it arrived (a timeout mid-body): retried as a timeout.
                            Err(BodyError::Read(e)) => break 'reply (e, retry_after, status_code),
                            Err(BodyError::TooLarge) => {
                                let msg = format!(
                                    "the reply is larger than {} MiB; refused (not retried)",
                                    MAX_REPLY_BYTES >> 20
                                );
                                http.push(HttpTry {
                                    status: status_code,
                                    error: Some(msg.clone()),
                                    seconds: tt.elapsed().as_secs_f64(),
                                    backoff_seconds: 0.0,
                                });
                                return Err(InfraError {
                                    message: msg,
                                    requests: attempt + 1,
                                    http,
                                    seconds: t0.elapsed().as_secs_f64(),
                                });
                            }
                        };
                        if status.is_success() {
                            let parsed = serde_json::from_str::<Value>(&body)
                                .map_err(|e| format!("response body is not JSON: {e}"))
                                .and_then(|v| self.parse(&v));
                            http.push(HttpTry {
                                status: Some(status.as_u16()),
                                error: parsed.as_ref().err().cloned(),
                                seconds: tt.elapsed().as_secs_f64(),
                                backoff_seconds: 0.0,
                            });
                            return match parsed {
                                Ok(mut c) => {
                                    c.retries = attempt;
                                    c.http = http;
                                    c.seconds = t0.elapsed().as_secs_f64();
                                    Ok(c)
                                }
                                Err(e) => Err(InfraError {
                                    message: format!("bad response: {e}"),
                                    requests: attempt + 1,
                                    http,
                                    seconds: t0.elapsed().as_secs_f64(),
                                }),
                            };
                        }
                        let snippet: String = body.chars().take(300).collect();
                        let msg = format!("HTTP {}: {}", status.as_u16(), snippet);
                        let transient = status.as_u16() == 429
                            || status.as_u16() == 408
                            || status.is_server_error();
                        if !transient {
                            http.push(HttpTry {
                                status: Some(status.as_u16()),
                                error: Some(msg.clone()),
                                seconds: tt.elapsed().as_secs_f64(),
                                backoff_seconds: 0.0,
                            });
                            return Err(InfraError {
                                message: msg,
                                requests: attempt + 1,
                                http,
                                seconds: t0.elapsed().as_secs_f64(),
                            });
                        }
                        (msg, retry_after, Some(status.as_u16()))
                    }
                    Err(e) if e.is_connect() && !e.is_timeout() => {
                        // Nothing listening (or no such host): retrying changes nothing.
                        let msg = format!(
                            "cannot connect to {}: {} (is the server running, and is --base-url \
                             right? not retried)",
                            self.base_url,
                            error_chain(&e)
                        );
                        let _ = self.unreachable.set(msg.clone());
                        http.push(HttpTry {
                            status: None,
                            error: Some(msg.clone()),
                            seconds: tt.elapsed().as_secs_f64(),
                            backoff_seconds: 0.0,
                        });
                        return Err(InfraError {
                            message: msg,
                            requests: attempt + 1,
                            http,
                            seconds: t0.elapsed().as_secs_f64(),
                        });
                    }
                    Err(e) => {
                        // reqwest errors carry the URL but never our headers.
                        let what = if e.is_timeout() { " (timed out)" } else { "" };
                        (
                            format!("request failed{what}: {}", error_chain(&e)),
                            None,
                            None,
                        )
                    }
                };
            let mut tried = HttpTry {
                status,
                error: Some(err.clone()),
                seconds: tt.elapsed().as_secs_f64(),
                backoff_seconds: 0.0,
            };
            if attempt >= self.retry.max_retries {
                http.push(tried);
                return Err(InfraError {
                    message: format!("{err} (gave up after {} retries)", attempt),
                    requests: attempt + 1,
                    http,
                    seconds: t0.elapsed().as_secs_f64(),
                });
            }
            let backoff = retry_after
                .unwrap_or_else(|| {
                    self.retry
                        .initial_backoff
                        .saturating_mul(1u32 << attempt.min(16))
                })
                .min(self.retry.max_backoff);
            tried.backoff_seconds = backoff.as_secs_f64();
            http.push(tried);
            tokio::time::sleep(backoff).await;
            attempt += 1;
        }
    }
}

/// An error and its causes, `a: b: c` (reqwest's own message hides the cause: "error sending
/// request" says nothing of the refused connection under it).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

enum BodyError {
    /// Reading failed (a timeout, a cut connection): the message.
    Read(String),
    TooLarge,
}

/// The reply's body as text, read in chunks and refused past `cap` bytes.
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<String, BodyError> {
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if buf.len() + c.len() > cap {
                    return Err(BodyError::TooLarge);
                }
                buf.extend_from_slice(&c);
            }
            Ok(None) => return Ok(String::from_utf8_lossy(&buf).into_owned()),
            Err(e) => {
                let what = if e.is_timeout() { " (timed out)" } else { "" };
                return Err(BodyError::Read(format!(
                    "reading the reply failed{what} after {} bytes: {}",
                    buf.len(),
                    error_chain(&e)
                )));
            }
        }
    }
}

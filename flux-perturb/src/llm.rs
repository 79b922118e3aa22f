//! `--proposer llm`: a model proposes the input changes, as literal replacements
//! `{file, line, col, old, new}` at the sites the AST mutator lists; they are applied through
//! the same syntax-tree path (`Mutator::apply`, which validates each edit) and then go through
//! the same harvest and screening as the seeded mutations.
//!
//! One request per instance (flux-eval's `ChatClient`: OpenAI or Anthropic wire protocol,
//! temperature 0, retries) asks for N variants. The key comes from the options or the
//! provider's environment variable and is never written or logged.
use crate::mutator::{Edit, Site, TestFile};
use anyhow::{anyhow, bail, Result};
use flux_eval::{Api, ChatClient, Message, RetryPolicy};
use serde_json::Value;
use std::time::Duration;

#[derive(Clone)]
pub struct LlmOptions {
    pub api: Api,
    pub base_url: String,
    pub model: String,
    /// `None`: `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub max_output_tokens: u32,
}

impl std::fmt::Debug for LlmOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmOptions")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl LlmOptions {
    pub fn new(api: Api, base_url: &str, model: &str) -> Self {
        LlmOptions {
            api,
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key: None,
            timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            max_output_tokens: 4096,
        }
    }
}

pub const SYSTEM: &str = "You write input perturbations for an execution-reasoning benchmark. \
A benchmark question is asked about a traced run of a Python test; its gold answer is harvested \
from the trace. You change literal inputs of the test so that the test still runs and ends the \
same way, but the gold answer changes, so that a memorised answer becomes wrong. Reply with JSON only.";

/// What the model is asked for one instance: `n` variants of its test's inputs.
pub struct Ask<'a> {
    /// `repository/id`.
    pub name: &'a str,
    pub question: &'a str,
    /// `pass` or `fail`: how the test ends.
    pub expect: &'a str,
    pub files: &'a [TestFile],
    /// The input literals the model may change (the AST mutator's sites).
    pub sites: &'a [Site],
    pub n: usize,
    /// The variation seed the prompt names.
    pub seed: u64,
    /// Edits per variant, at most.
    pub max_edits: usize,
}

/// The user message for one instance.
pub fn prompt(ask: &Ask<'_>) -> String {
    let Ask {
        name,
        question,
        expect,
        files,
        sites,
        n,
        seed,
        max_edits,
    } = *ask;
    let mut s = format!(
        "Instance: {name}\n\nThe question asked about the test run:\n{}\n\n",
        question.trim()
    );
    s.push_str(&format!(
        "The test is expected to {expect}.\n\nTest files (line numbers on the left):\n"
    ));
    for f in files {
        s.push_str(&format!("--- {}\n", f.path));
        for (i, l) in f.source.lines().enumerate() {
            s.push_str(&format!("{:>4}  {l}\n", i + 1));
        }
    }
    s.push_str("\nInput literals you may change (file:line:col kind function: current text):\n");
    for st in sites
        .iter()
        .filter(|st| !matches!(st.kind.as_str(), "kwargs" | "commutative" | "binop"))
    {
        s.push_str(&format!(
            "  {}:{}:{} {} {}: {}\n",
            st.file,
            st.line,
            st.col,
            st.kind,
            st.function,
            st.text.replace('\n', "\\n")
        ));
    }
    s.push_str(&format!(
        "\nPropose {n} different variants (variation seed {seed}). A variant is a list of 1 to \
         {max_edits} edits; an edit replaces one listed literal (give its file, line, col and \
         current text as `old`) by another Python literal (`new`, Python syntax) of the same \
         type. Do not touch expected values of assertions. Reply with JSON only, in this shape:\n\
         {{\"variants\": [[{{\"file\": \"{}\", \"line\": 6, \"col\": 36, \"old\": \"60984\", \
         \"new\": \"60985\"}}], ...]}}\n",
        files
            .first()
            .map(|f| f.path.as_str())
            .unwrap_or("test_x.py")
    ));
    s
}

/// Turn the model's reply into up to `n` edit lists (lenient: a bare list of variants, a
/// variant given as `{"edits": [...]}`, line/col given as strings).
pub fn parse_variants(text: &str, n: usize) -> Result<Vec<Vec<Edit>>> {
    let v = flux_eval::parse::extract_json(text)
        .map_err(|e| anyhow!("the reply holds no JSON: {e}"))?;
    let list = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => match o.get("variants") {
            Some(Value::Array(a)) => a.clone(),
            _ => bail!("the reply has no `variants` list"),
        },
        _ => bail!("the reply is not a JSON object or list"),
    };
    let num = |x: Option<&Value>| -> u32 {
        match x {
            Some(Value::Number(n)) => n.as_u64().unwrap_or(0) as u32,
            Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
            _ => 0,
        }
    };
    let text_of = |x: Option<&Value>| -> Option<String> {
        match x {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        }
    };
    let mut out = Vec::new();
    for var in list.into_iter().take(n) {
        let edits = match var {
            Value::Array(a) => a,
            Value::Object(ref o) => match o.get("edits") {
                Some(Value::Array(a)) => a.clone(),
                _ => vec![var.clone()],
            },
            _ => Vec::new(),
        };
        let mut es = Vec::new();
        for e in edits {
            let (Some(old), Some(new)) = (text_of(e.get("old")), text_of(e.get("new"))) else {
                continue;
            };
            es.push(Edit {
                file: e.get("file").and_then(|f| f.as_str()).map(String::from),
                line: num(e.get("line")),
                col: num(e.get("col")),
                old,
                new,
            });
        }
        out.push(es);
    }
    Ok(out)
}

/// Ask the model for `ask.n` variants of one instance.
pub async fn propose(opts: &LlmOptions, ask: &Ask<'_>) -> Result<Vec<Vec<Edit>>> {
    let key = match &opts.api_key {
        Some(k) => Some(k.clone()),
        None => std::env::var(opts.api.key_env())
            .ok()
            .filter(|k| !k.is_empty()),
    };
    let Some(key) = key else {
        bail!("no API key: set {}", opts.api.key_env());
    };
    let client = ChatClient::new(
        opts.api,
        &opts.base_url,
        &opts.model,
        Some(key),
        opts.max_output_tokens,
        opts.timeout,
        opts.retry.clone(),
    )
    .map_err(|e| anyhow!(e))?;
    let user = prompt(ask);
    let c = client
        .complete(
            SYSTEM,
            &[Message {
                role: "user",
                content: user,
            }],
        )
        .await
        .map_err(|e| anyhow!("model request failed: {e}"))?;
    parse_variants(&c.text, ask.n)
}

//! One sample of one instance: the conversation with the model, its tool rounds and repair
//! rounds, recorded attempt by attempt ([`crate::transcript`]).
//!
//! A reply is used when its first JSON object has the template's shape; otherwise the
//! problem is sent back (up to [`crate::EvalOptions::repair_rounds`] times). Tool calls are
//! answered until the tool-round limit; past it the tools refuse and the model must answer.
//! A request that still fails after the client's retries makes the sample an infrastructure
//! error: never scored as wrong.

use serde_json::Value;

use crate::client::{ChatClient, Completion, Message};
use crate::price::Price;
use crate::prompt::Prompt;
use crate::tools::Toolbox;
use crate::transcript::{now, Attempt, SampleTranscript, ToolUse};
use crate::{parse, AnswerStatus, EvalOptions, SampleMeta};
use flux_score::Instance;

fn status_name(s: AnswerStatus) -> &'static str {
    match s {
        AnswerStatus::Ok => "ok",
        AnswerStatus::InfraError => "infra_error",
        AnswerStatus::Unparseable => "unparseable",
    }
}

struct Run<'a> {
    c: &'a ChatClient,
    system: &'a str,
    price: Option<Price>,
    meta: SampleMeta,
    attempts: Vec<Attempt>,
    messages: Vec<Value>,
}

impl Run<'_> {
    /// One request; `Err` is an infrastructure error (recorded).
    async fn request(
        &mut self,
        round: u32,
        specs: &[crate::client::ToolSpec],
    ) -> Result<Completion, String> {
        let started_at = now();
        self.meta.attempts += 1;
        match self
            .c
            .complete_with(self.system, &self.messages, specs)
            .await
        {
            Ok(r) => {
                self.meta.tokens_in += r.tokens_in;
                self.meta.tokens_out += r.tokens_out;
                self.meta.retries += r.retries;
                self.attempts.push(Attempt {
                    round,
                    messages_sent: self.messages.len(),
                    started_at,
                    seconds: r.seconds,
                    status: "ok".into(),
                    error: None,
                    http: r.http.clone(),
                    response: r.raw.clone(),
                    text: r.text.clone(),
                    stop_reason: r.stop_reason.clone(),
                    tool_calls: Vec::new(),
                    tokens_in: r.tokens_in,
                    tokens_out: r.tokens_out,
                    cost: self.price.map(|p| p.cost(r.tokens_in, r.tokens_out)),
                });
                Ok(r)
            }
            Err(e) => {
                self.meta.retries += e.requests.saturating_sub(1);
                self.attempts.push(Attempt {
                    round,
                    messages_sent: self.messages.len(),
                    started_at,
                    seconds: e.seconds,
                    status: "infra_error".into(),
                    error: Some(e.message.clone()),
                    http: e.http.clone(),
                    response: Value::Null,
                    text: String::new(),
                    stop_reason: None,
                    tool_calls: Vec::new(),
                    tokens_in: 0,
                    tokens_out: 0,
                    cost: None,
                });
                Err(e.message)
            }
        }
    }

    fn record_tools(&mut self, uses: Vec<ToolUse>) {
        if let Some(a) = self.attempts.last_mut() {
            a.tool_calls = uses;
        }
    }
}

/// Ask one sample. Returns the answer (when one could be parsed), its meta and transcript.
pub(crate) async fn ask_sample(
    inst: &Instance,
    o: &EvalOptions,
    c: &ChatClient,
    p: &Prompt,
    source: Option<&std::path::Path>,
    sample: u32,
    price: Option<Price>,
) -> (Option<Value>, SampleMeta, SampleTranscript) {
    let t0 = std::time::Instant::now();
    let mut run = Run {
        c,
        system: &p.system,
        price,
        meta: SampleMeta::default(),
        attempts: Vec::new(),
        messages: vec![Message {
            role: "user",
            content: p.user.clone(),
        }
        .to_value()],
    };
    let tools_on = o.mode.tools() && source.is_some();
    let specs = if tools_on {
        crate::tools::specs()
    } else {
        Vec::new()
    };
    let mut toolbox = tools_on.then(|| {
        let used = (p.user.len() + p.system.len()) / crate::prompt::CHARS_PER_TOKEN;
        Toolbox::new(
            source.map(|s| s.to_path_buf()),
            o.max_context_tokens.saturating_sub(used + 2_000),
        )
    });
    let answer = converse(inst, o, &mut run, &specs, toolbox.as_mut()).await;
    let mut meta = run.meta;
    meta.seconds = t0.elapsed().as_secs_f64();
    meta.cost = price.map(|pr| pr.cost(meta.tokens_in, meta.tokens_out));
    let tr = SampleTranscript {
        sample,
        status: status_name(meta.status).into(),
        error: meta.error.clone(),
        answer: answer.clone(),
        messages: run.messages,
        attempts: run.attempts,
    };
    (answer, meta, tr)
}

async fn converse(
    inst: &Instance,
    o: &EvalOptions,
    run: &mut Run<'_>,
    specs: &[crate::client::ToolSpec],
    mut toolbox: Option<&mut Toolbox>,
) -> Option<Value> {
    let mut last_parsed: Option<Value> = None;
    let mut tool_rounds = 0u32;
    for round in 0..=o.repair_rounds {
        // One model turn, possibly through several tool rounds.
        let reply = loop {
            let reply = match run.request(round, specs).await {
                Ok(r) => r,
                Err(e) => {
                    run.meta.status = AnswerStatus::InfraError;
                    run.meta.error = Some(e);
                    return None;
                }
            };
            let Some(tb) = toolbox
                .as_deref_mut()
                .filter(|_| !reply.tool_calls.is_empty())
            else {
                break reply;
            };
            if tool_rounds >= o.max_tool_rounds + 2 {
                // The model ignores the refusals: stop here with what it said.
                break reply;
            }
            tool_rounds += 1;
            let mut uses = Vec::new();
            for call in &reply.tool_calls {
                let out = if tool_rounds > o.max_tool_rounds {
                    "error: no more tool calls allowed; answer now with the JSON object".to_string()
                } else {
                    run.meta.tool_calls += 1;
                    tb.run(call)
                };
                uses.push(ToolUse {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    result: out,
                });
            }
            let results: Vec<(String, String)> = uses
                .iter()
                .map(|u| (u.id.clone(), u.result.clone()))
                .collect();
            run.record_tools(uses);
            run.messages.push(reply.assistant.clone());
            run.messages.extend(run.c.tool_results(&results));
        };
        let problem = match parse::extract_json(&reply.text) {
            Err(e) => e,
            Ok(v) => match parse::validate_shape(&inst.template, &v) {
                Ok(()) => {
                    run.meta.status = AnswerStatus::Ok;
                    run.meta.error = None;
                    run.messages.push(reply.assistant.clone());
                    let mut v = v;
                    if let Some(obj) = v.as_object_mut() {
                        if let Some(r) = obj.remove("reasoning") {
                            run.meta.reasoning = Some(match r {
                                Value::String(s) => s,
                                other => other.to_string(),
                            });
                        }
                    }
                    return Some(v);
                }
                Err(e) => {
                    last_parsed = Some(v);
                    format!("the JSON does not match the template: {e}")
                }
            },
        };
        run.meta.status = AnswerStatus::Unparseable;
        run.meta.error = Some(problem.clone());
        run.meta.raw_reply = Some(reply.text.chars().take(4000).collect());
        run.messages.push(reply.assistant.clone());
        if round < o.repair_rounds {
            let again = format!(
                "Your reply could not be used: {problem}. Reply again with only one JSON object of the template's shape."
            );
            if !reply.tool_calls.is_empty() {
                // Tool calls need answers before another user message; end them here.
                let results: Vec<(String, String)> = reply
                    .tool_calls
                    .iter()
                    .map(|c| {
                        (
                            c.id.clone(),
                            "error: no more tool calls allowed".to_string(),
                        )
                    })
                    .collect();
                run.messages
                    .extend(run.c.tool_results_then(&results, &again));
            } else {
                run.messages.push(
                    Message {
                        role: "user",
                        content: again,
                    }
                    .to_value(),
                );
            }
        }
    }
    // Keep the last parsed (ill-shaped) answer for inspection; meta says unparseable.
    last_parsed
}

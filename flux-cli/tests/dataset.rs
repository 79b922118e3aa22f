//! Self-contained datasets (issue 24.5): `flux export --format hf` rows hold the prompts
//! `flux eval` renders; the real `datasets` library loads the export (Parquet and JSONL) with
//! the instances' rows, splits and fields; the Inspect task of `--format inspect`, run by the
//! real `inspect_ai` with its own `mockllm` provider, scores a fixture set as `flux score` does.
//!
//! The Python side runs in the virtual environment `cargo xtask setup` makes
//! (`<workspace>/.flux-cache/venv-hub`, or the interpreter `$FLUX_HUB_PYTHON` names); without
//! it these tests skip loudly.

use crate::common::{run_flux, tempdir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The interpreter with `datasets` and `inspect_ai`, or a loud skip.
fn hub_python(what: &str) -> Option<PathBuf> {
    crate::common::hub_python(what, &["datasets", "inspect_ai"])
}

fn flux_ok(args: &[&str]) -> String {
    let out = run_flux(args);
    assert!(
        out.status.success(),
        "flux {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn rows(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The JSON a Python script printed on its last line; the script must have succeeded.
fn last_json_line(run: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Every row's system and user messages are what `flux eval` sends for its instance (the same
/// `prompt::build`, the same source tree), its test source and context are the prompt's, and
/// its gold and template are the instance's.
#[test]
fn hf_rows_hold_the_prompt_flux_eval_renders() {
    let d = tempdir();
    // A source tree: the prompts' context is chosen from it (the starters' packages are not
    // needed to show that the row holds what eval renders from whatever tree it is given).
    let tree = d.join("src");
    std::fs::create_dir_all(tree.join("pkg")).unwrap();
    std::fs::write(tree.join("pkg/mod.py"), "def f(x):\n    return x + 1\n").unwrap();
    let inst = workspace().join("instances");
    let out = d.join("ds");
    flux_ok(&[
        "export",
        "--format",
        "hf",
        "--instances",
        s(&inst),
        "--source-root",
        s(&tree),
        s(&out),
    ]);
    let insts: BTreeMap<String, flux_score::Instance> = flux_score::discover(&[inst])
        .unwrap()
        .into_iter()
        .filter(|i| i.oracle.is_some())
        .map(|i| (i.key(), i))
        .collect();
    let rows = rows(&out.join("data/test.jsonl"));
    assert_eq!(rows.len(), insts.len());
    let located = flux_eval::Located::Dir(tree.clone());
    let mut with_tests = 0;
    for r in &rows {
        let key = r["instance_id"].as_str().unwrap();
        let i = &insts[key];
        let p = flux_eval::prompt::build(
            i,
            &flux_eval::prompt::PromptConfig {
                source: &located,
                max_context_tokens: 100_000,
                reasoning: false,
                mode: flux_eval::Mode::Context,
                system: None,
            },
        );
        assert_eq!(r["prompt"].as_str(), Some(p.user.as_str()), "{key}");
        assert_eq!(r["system"].as_str(), Some(p.system.as_str()), "{key}");
        let test_source = r["test_source"].as_str().unwrap();
        assert!(p.user.contains(test_source), "{key}");
        assert!(p.user.contains(r["context"].as_str().unwrap()), "{key}");
        with_tests += usize::from(!test_source.is_empty());
        let gold: Value = serde_json::from_str(r["gold"].as_str().unwrap()).unwrap();
        assert_eq!(Some(&gold), i.oracle.as_ref(), "{key}");
        let template: Value = serde_json::from_str(r["template"].as_str().unwrap()).unwrap();
        assert_eq!(template, i.template, "{key}");
        assert_eq!(r["question"].as_str(), Some(i.question.as_str()), "{key}");
        assert_eq!(r["kind"].as_str(), Some(i.kind.as_str()), "{key}");
    }
    // The starters keep their tests in the instance directory: every prompt shows them.
    assert_eq!(with_tests, rows.len());
    // A missing source stops the export, naming the instance and the command that makes it.
    let out = run_flux(&[
        "export",
        "--format",
        "hf",
        "--instances",
        s(&workspace().join("instances/sympy")),
        "--source-root",
        s(&d.join("nowhere")),
        s(&d.join("ds2")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("sympy/") && err.contains("flux images source") && err.contains("--no-source"),
        "{err}"
    );
}

/// The Python side of the `datasets` check: load the default config (Parquet) and the JSONL
/// files, and print what came out; `datasets`' warnings are captured and printed too.
const LOAD: &str = r#"
import json, logging, sys
import datasets
caught = []
class H(logging.Handler):
    def emit(self, rec):
        if rec.levelno >= logging.WARNING:
            caught.append(rec.getMessage())
logging.getLogger("datasets").addHandler(H())
out = sys.argv[1]
pq = datasets.load_dataset(out)
splits = list(pq.keys())
# JSONL carries no schema: read with the card's features (a column null in a whole block of
# rows would otherwise be typed null there and string elsewhere).
js = datasets.load_dataset("json", data_files={s: f"{out}/data/{s}.jsonl" for s in splits},
                           features=pq[splits[0]].features)
res = {"warnings": caught, "splits": {}}
for s in splits:
    a, b = pq[s].to_list(), js[s].to_list()
    res["splits"][s] = {
        "rows": a,
        "same_as_jsonl": a == b,
        "columns": list(pq[s].features.keys()),
        "features": {k: str(v) for k, v in pq[s].features.items()},
    }
print(json.dumps(res))
"#;

/// `datasets` loads the export: one split per instance split, one row per instance, every
/// column, the gold and question of each instance, no warning about the card.
#[test]
fn hf_export_loads_with_datasets() {
    let Some(py) = hub_python("the datasets load of flux export --format hf") else {
        return;
    };
    let d = tempdir();
    let (inst, var) = (workspace().join("instances"), workspace().join("variants"));
    let out = d.join("ds");
    flux_ok(&[
        "export",
        "--format",
        "hf",
        "--no-source",
        "--instances",
        s(&inst),
        "--instances",
        s(&var),
        s(&out),
    ]);
    let run = Command::new(&py)
        .args(["-c", LOAD, s(&out)])
        .env("HF_HOME", d.join("hf-home"))
        .env("HF_DATASETS_OFFLINE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let res = last_json_line(&run);
    assert_eq!(res["warnings"], json!([]), "datasets warned");
    let mut want: BTreeMap<String, BTreeMap<String, flux_score::Instance>> = BTreeMap::new();
    for i in flux_score::discover(&[inst, var]).unwrap() {
        if i.oracle.is_some() {
            want.entry(i.split.clone()).or_default().insert(i.key(), i);
        }
    }
    let got: Vec<&String> = res["splits"].as_object().unwrap().keys().collect();
    assert_eq!(got, want.keys().collect::<Vec<_>>());
    for (split, insts) in &want {
        let sp = &res["splits"][split];
        assert_eq!(
            sp["same_as_jsonl"],
            json!(true),
            "{split}: parquet and JSONL differ"
        );
        let features = sp["features"].as_object().unwrap();
        let names: Vec<&str> = sp["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let columns: Vec<&str> = flux_interop::hf::COLUMNS.iter().map(|c| c.0).collect();
        assert_eq!(names, columns, "{split}");
        assert!(features["order_insensitive"]
            .as_str()
            .unwrap()
            .contains("string"));
        let rows = sp["rows"].as_array().unwrap();
        assert_eq!(rows.len(), insts.len(), "{split}");
        for r in rows {
            let key = r["instance_id"].as_str().unwrap();
            let i = insts
                .get(key)
                .unwrap_or_else(|| panic!("{split}: no instance {key}"));
            let gold: Value = serde_json::from_str(r["gold"].as_str().unwrap()).unwrap();
            assert_eq!(Some(&gold), i.oracle.as_ref(), "{key}");
            assert_eq!(r["question"].as_str(), Some(i.question.as_str()), "{key}");
            assert_eq!(r["split"].as_str(), Some(split.as_str()), "{key}");
            assert_eq!(r["kind"].as_str(), Some(i.kind.as_str()), "{key}");
            assert_eq!(r["order_insensitive"], json!(i.order_insensitive), "{key}");
            assert_eq!(r["variant_of"].is_null(), split != "variants", "{key}");
        }
    }
}

/// Inspect runs the exported task with `mockllm` answering each prompt from the fixture (found
/// by the instance key the prompt names), and prints each sample's score and explanation.
/// `task_args` is JSON (`{}`: the default, binary-free scorer).
const INSPECT: &str = r#"
import json, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model
task, replies, task_args, logs = sys.argv[1:5]
replies = json.load(open(replies))
def reply(input, tools, tool_choice, config):
    user = [m for m in input if m.role == "user"][-1].text
    key = user.split("Instance: ", 1)[1].split()[0]
    out = ModelOutput.from_content(model="mockllm/model", content=replies[key])
    # With usage given, mockllm does not count the prompt's tokens (tiktoken would download
    # its encoding from the network).
    out.usage = ModelUsage(input_tokens=len(user) // 4, output_tokens=1, total_tokens=len(user) // 4 + 1)
    return out
model = get_model("mockllm/model", custom_outputs=reply)
log = inspect_eval(task, model=model, task_args=json.loads(task_args), log_dir=logs,
                   display="none", max_samples=4)[0]
assert log.status == "success", log.error
print(json.dumps({s.id: dict(next(iter(s.scores.values())).value,
                             explanation=next(iter(s.scores.values())).explanation)
                  for s in log.samples}))
"#;

/// Run the exported task in `out` under Inspect with the replies of `replies` (a JSON file).
fn run_inspect(py: &Path, out: &Path, replies: &Path, task_args: &Value, logs: &Path) -> Value {
    // Inspect is given the task as a relative path: with Python 3.11 it cannot resolve an
    // absolute one (pathlib's glob refuses "non-relative patterns"). No flux binary is in reach
    // unless the task arguments name it.
    let run = Command::new(py)
        .current_dir(out)
        .args(["-c", INSPECT])
        .args(["flux_task.py", s(replies), &task_args.to_string(), s(logs)])
        .env("INSPECT_LOG_DIR", logs)
        .env("PATH", "/usr/bin:/bin")
        .env_remove("FLUX_BIN")
        .output()
        .unwrap();
    last_json_line(&run)
}

/// A wrong answer of the template's shape: every leaf a value of its type that no gold has.
fn wrong(template: &Value) -> Value {
    match template {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), wrong(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().take(1).map(wrong).collect()),
        Value::String(t) if t == "int" => json!(-987_654),
        Value::String(t) if t == "float" => json!(-9.5e9),
        Value::String(t) if t == "bool" => json!(null),
        _ => json!("not-this-value"),
    }
}

/// The Inspect task, run without any flux binary in reach, gives `flux score`'s verdicts (pass,
/// partial credit and reason) on the same answers: replies that are the gold (bare, and in prose
/// with a code fence), wrong answers of the right shape, and a reply without JSON; with `-T
/// scorer=flux` (the binary) it gives the same. (The Python scorer is held to every rule of
/// `flux score` by `scoring_port`.)
#[test]
fn inspect_task_scores_a_fixture_set_as_flux_score_does_without_the_binary() {
    let Some(py) = hub_python("the Inspect task of flux export --format inspect") else {
        return;
    };
    let d = tempdir();
    let inst = workspace().join("instances");
    let out = d.join("task");
    flux_ok(&[
        "export",
        "--format",
        "inspect",
        "--no-source",
        "--instances",
        s(&inst),
        s(&out),
    ]);
    let insts: Vec<flux_score::Instance> = flux_score::discover(std::slice::from_ref(&inst))
        .unwrap()
        .into_iter()
        .filter(|i| i.oracle.is_some())
        .collect();
    let (mut replies, mut preds) = (serde_json::Map::new(), String::new());
    for (n, i) in insts.iter().enumerate() {
        let gold = i.oracle.clone().unwrap();
        let (reply, answer) = match n % 4 {
            0 => (gold.to_string(), gold),
            1 => (
                format!("Reading the code, the answer is:\n```json\n{gold:#}\n```\nDone."),
                gold,
            ),
            2 => (wrong(&i.template).to_string(), wrong(&i.template)),
            _ => ("I cannot tell.".to_string(), Value::Null),
        };
        replies.insert(i.key(), Value::String(reply));
        preds.push_str(&json!({"instance_id": i.key(), "answer": answer}).to_string());
        preds.push('\n');
    }
    std::fs::write(d.join("replies.json"), Value::Object(replies).to_string()).unwrap();
    std::fs::write(d.join("preds.jsonl"), preds).unwrap();
    let replies = d.join("replies.json");
    let inspect = run_inspect(&py, &out, &replies, &json!({}), &d.join("logs"));
    // The task's other scorer, the flux binary itself, gives the same scores.
    let args = json!({"scorer": "flux", "flux": env!("CARGO_BIN_EXE_flux")});
    let binary = run_inspect(&py, &out, &replies, &args, &d.join("logs-flux"));
    assert_eq!(inspect, binary);
    let report: Value = serde_json::from_str(&flux_ok(&[
        "score",
        "--instances",
        s(&inst),
        "--predictions",
        s(&d.join("preds.jsonl")),
        "--format",
        "json",
        "--results",
        s(&d.join("results.json")),
    ]))
    .unwrap();
    // The dataset is a set `flux score` reads as it reads the instance directories: the same
    // verdicts, and the same content digest in the results file.
    let from_rows: Value = serde_json::from_str(&flux_ok(&[
        "score",
        "--instances",
        s(&out.join("data/test.jsonl")),
        "--predictions",
        s(&d.join("preds.jsonl")),
        "--format",
        "json",
        "--results",
        s(&d.join("results-ds.json")),
    ]))
    .unwrap();
    assert_eq!(from_rows["instances"], report["instances"]);
    let digest = |f: &str| {
        let r: Value = serde_json::from_str(&std::fs::read_to_string(d.join(f)).unwrap()).unwrap();
        r["set"]["digest"].as_str().unwrap().to_string()
    };
    assert_eq!(digest("results-ds.json"), digest("results.json"));
    let flux: BTreeMap<String, &Value> = report["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["repo"].as_str().unwrap(),
                    r["id"].as_str().unwrap()
                ),
                r,
            )
        })
        .collect();
    assert_eq!(inspect.as_object().unwrap().len(), insts.len());
    let mut passed = 0;
    let golds = (0..insts.len()).filter(|n| n % 4 < 2).count();
    for i in &insts {
        let (k, f) = (i.key(), flux[&i.key()]);
        let v = &inspect[&k];
        let pass = f["pass"] == json!(true);
        assert_eq!(v["pass"], json!(if pass { 1.0 } else { 0.0 }), "{k}: {f}");
        let partial = f["partial"].as_f64().unwrap_or(0.0);
        assert!(
            (v["partial"].as_f64().unwrap() - partial).abs() < 1e-12,
            "{k}: {v} vs {f}"
        );
        let reason = f["reason"].as_str().unwrap_or("passed");
        assert_eq!(v["explanation"].as_str(), Some(reason), "{k}");
        passed += usize::from(pass);
    }
    // The fixture is half gold, half not: both verdicts are exercised.
    assert_eq!(passed, golds);
}

/// Rows of the generated set carry the preamble their question was written against (its id and
/// text, which the system prompt holds) and the instance's difficulty features.
#[test]
fn hf_rows_of_the_generated_set_carry_their_preamble_and_difficulty() {
    let d = tempdir();
    let set = workspace().join("sets/flux-gen-v1/instances");
    let out = d.join("ds");
    flux_ok(&[
        "export",
        "--format",
        "hf",
        "--no-source",
        "--limit",
        "25",
        "--instances",
        s(&set),
        s(&out),
    ]);
    let insts: BTreeMap<String, flux_score::Instance> = flux_score::discover(&[set])
        .unwrap()
        .into_iter()
        .map(|i| (i.key(), i))
        .collect();
    let mut n = 0;
    for split in ["test", "train"] {
        let file = out.join(format!("data/{split}.jsonl"));
        if !file.exists() {
            continue;
        }
        for r in rows(&file) {
            let key = r["instance_id"].as_str().unwrap();
            let i = &insts[key];
            let id = i
                .preamble
                .as_deref()
                .unwrap_or_else(|| panic!("{key}: no preamble"));
            let p = flux_instance::preamble::by_id(id).unwrap();
            assert_eq!(r["preamble_id"].as_str(), Some(id), "{key}");
            assert_eq!(r["preamble"].as_str(), Some(p.text), "{key}");
            assert!(r["system"].as_str().unwrap().contains(p.text), "{key}");
            let diff: Value = serde_json::from_str(r["difficulty"].as_str().unwrap()).unwrap();
            assert!(
                diff["calls"].as_u64().is_some() && diff["easy"].is_boolean(),
                "{key}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 25);
}

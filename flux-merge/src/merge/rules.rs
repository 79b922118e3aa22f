//! The merge's rules paired with their evidence (tests only).
//!
//! The module doc's rule table is the one list of the merge's rules. Each rule has evidence that
//! it does what it says: a counter of its (`counters`) that is not zero in at least one
//! snapshot of the offline corpus (`tests/corpus/*/*.snap`), or a test whose doc names it
//! (`` rule `name` ``) — for a rule no recorded run exercises, a hand-built stream here that
//! fails when the rule is taken out. ARCHITECTURE.md shows the same table, generated from the
//! module doc (`UPDATE_EXPECT=1` rewrites it).
use super::counters::Counters;
use std::path::{Path, PathBuf};

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One row of the rule table: its rule, its home and what it says, as the module doc writes
/// them.
struct Row {
    rule: String,
    home: String,
    text: String,
}

/// The rule table of the merge's module doc (`src/merge/mod.rs`).
fn rule_table() -> Vec<Row> {
    let doc = include_str!("mod.rs");
    doc.lines()
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|l| {
            let (rule, rest) = l.split_once('`')?;
            let mut cells = rest.trim_start_matches(" |").splitn(2, " | ");
            let home = cells.next()?.trim().to_string();
            let text = cells
                .next()?
                .trim()
                .trim_end_matches('|')
                .trim()
                .to_string();
            Some(Row {
                rule: rule.to_string(),
                home,
                text,
            })
        })
        .collect()
}

/// Every file under `dir` ending in `ext`, recursively.
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p, ext));
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Counters (`merge.*`) that are not zero in at least one snapshot of the corpus.
fn counted_in_corpus() -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for snap in files(&crate_dir().join("tests/corpus"), ".snap") {
        let text = std::fs::read_to_string(&snap).unwrap();
        for l in text.lines() {
            let Some((name, n)) = l.strip_prefix("count ").and_then(|l| l.split_once(" = ")) else {
                continue;
            };
            if n.trim().parse::<u64>().is_ok_and(|n| n > 0) {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// The doc comment of every `#[test]` of this crate (its sources and integration tests),
/// with the test's name.
fn test_docs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut sources = files(&crate_dir().join("src"), ".rs");
    sources.extend(files(&crate_dir().join("tests"), ".rs"));
    for f in sources {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            if *l != "#[test]" {
                continue;
            }
            let mut doc = Vec::new();
            let mut j = i;
            while j > 0 {
                j -= 1;
                if let Some(d) = lines[j].strip_prefix("///") {
                    doc.push(d.trim());
                } else if !lines[j].starts_with("#[") {
                    break;
                }
            }
            doc.reverse();
            let name = lines[i + 1..]
                .iter()
                .find_map(|l| l.split_once("fn ").map(|(_, r)| r))
                .and_then(|r| r.split('(').next())
                .unwrap_or("?")
                .to_string();
            out.push((name, doc.join(" ")));
        }
    }
    out
}

/// Whether a test's doc names `rule` as a rule: it says "rule" and writes `` `rule` ``.
fn names_rule(doc: &str, rule: &str) -> bool {
    doc.to_lowercase().contains("rule") && doc.contains(&format!("`{rule}`"))
}

/// The merge's module doc says every rule has a counter and a fixture that pins it; a rule no
/// recorded run exercises (its counter 0 in every snapshot, or no counter at all) is pinned by
/// a test that names it instead.
#[test]
fn every_rule_has_its_evidence() {
    let table = rule_table();
    assert!(table.len() > 20, "the rule table was not found");
    let counters = Counters::rules();
    let counted = counted_in_corpus();
    let tests = test_docs();
    let mut bad = Vec::new();
    for (rule, name) in &counters {
        if !table.iter().any(|r| r.rule == *rule) {
            bad.push(format!(
                "counter {name} belongs to `{rule}`, which the table does not have"
            ));
        }
    }
    for r in &table {
        let by_counter = counters
            .iter()
            .any(|(rule, name)| *rule == r.rule && counted.contains(*name));
        let by_test = tests.iter().any(|(_, doc)| names_rule(doc, &r.rule));
        if !by_counter && !by_test {
            let mine: Vec<&str> = counters
                .iter()
                .filter(|(rule, _)| *rule == r.rule)
                .map(|(_, n)| *n)
                .collect();
            bad.push(format!(
                "`{}`: {} and no test names it (`/// Rule `{}`: …` on a #[test])",
                r.rule,
                if mine.is_empty() {
                    "no counter".to_string()
                } else {
                    format!("{} is 0 in every snapshot", mine.join(", "))
                },
                r.rule
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "merge rules without evidence:\n{}",
        bad.join("\n")
    );
}

/// ARCHITECTURE.md's copy of the rule table: the module doc's rows, homes as module paths.
fn architecture_table() -> String {
    let mut out = String::from("| rule | home | what it says |\n|---|---|---|\n");
    for r in rule_table() {
        let home = match r.home.as_str() {
            "here" => "merge".to_string(),
            h => {
                let m = h.trim_matches(|c| c == '[' || c == ']' || c == '`');
                match m.strip_prefix("crate::") {
                    Some(m) => m.to_string(),
                    None => format!("merge::{m}"),
                }
            }
        };
        let text = r.text.replace("[`", "`").replace("`]", "`");
        out.push_str(&format!("| `{}` | `{home}` | {text} |\n", r.rule));
    }
    out
}

/// The line in ARCHITECTURE.md after which its copy of the table stands.
const MARK: &str =
    "<!-- the merge's rule table, generated from flux-merge/src/merge/mod.rs by its test \
                    `architecture_md_shows_the_rule_table` (UPDATE_EXPECT=1 rewrites it) -->";

#[test]
fn architecture_md_shows_the_rule_table() {
    let path = crate_dir().join("../ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(MARK)
        .expect("ARCHITECTURE.md marks where the rule table stands")
        + MARK.len()
        + 1;
    let len: usize = text[start..]
        .lines()
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.len() + 1)
        .sum();
    let (shown, want) = (&text[start..start + len], architecture_table());
    if shown == want {
        return;
    }
    if std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1") {
        let new = format!("{}{want}{}", &text[..start], &text[start + len..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    let differ = shown
        .lines()
        .zip(want.lines())
        .find(|(a, b)| a != b)
        .map_or_else(
            || {
                format!(
                    "{} rows shown, {} in the module doc",
                    shown.lines().count(),
                    want.lines().count()
                )
            },
            |(a, b)| format!("shown:  {a}\nmodule: {b}"),
        );
    panic!(
        "ARCHITECTURE.md's rule table is not the merge module doc's (run the test with \
         UPDATE_EXPECT=1 to regenerate it):\n{differ}"
    );
}

// Hand-built streams pinning the rules no recorded run exercises (or has no counter for).
// Each fails when its rule is taken out (checked once per rule, by disabling it).

use super::merge;
use crate::plan::{CallsMode, Capabilities};
use crate::protocol::{HookCapture, Stream};
use crate::usdt::{UsdtEvent, UsdtEvents};
use flux_trace::{Event, Kind, Meta, Scope, Source, Trace};

/// 3.11: USDT has returns (and lines), its entry probe misses Python-to-Python calls.
const PY311: Capabilities = Capabilities {
    entry: false,
    ret: true,
    line: true,
};
/// 3.15: USDT entries and returns.
const PY315: Capabilities = Capabilities {
    entry: true,
    ret: true,
    line: false,
};
/// 3.13: no function probes, the hook reports everything.
const PY313: Capabilities = Capabilities {
    entry: false,
    ret: false,
    line: false,
};

/// The `hello` of process `pid` as the hook on `python` sends it under the plan.
fn hello(pid: u32, python: &str, calls: &str, scope: &str, leave: &str) -> String {
    let mode = if python.starts_with("3.11") {
        "settrace"
    } else {
        "monitoring"
    };
    format!(
        r#"{{"hello":1,"pid":{pid},"python":"{python}","mode":"{mode}","calls":"{calls}","scope":"{scope}","leave":[{leave}],"gen_starts":"marked","clock":"monotonic_ns"}}"#
    )
}

/// One process's stream from its lines (hello first); its `bye` counts them.
fn stream(lines: &[&str]) -> Stream {
    let mut st = Stream::default();
    for l in lines {
        st.feed(l);
    }
    st.feed(&format!(r#"["bye",{}]"#, lines.len() - 1));
    assert!(st.bad.is_empty(), "{:?}", st.bad);
    st
}

/// A USDT event of `func` in `/t.py`, in thread 7/`tid`.
fn usdt(ts: u64, tid: u32, ev: Kind, func: &str, line: u32) -> UsdtEvent {
    UsdtEvent {
        ts,
        pid: 7,
        tid,
        line,
        ev,
        code: flux_trace::Code::new(flux_trace::CodeNames {
            file: "/t.py".into(),
            func: func.into(),
            ..Default::default()
        }),
    }
}

/// The merge of `streams` and `usdt` under the plan for `caps` and `scope`.
fn merged(caps: Capabilities, scope: Scope, streams: Vec<Stream>, usdt: Vec<UsdtEvent>) -> Trace {
    let plan = crate::plan::plan(caps, CallsMode::Auto, scope).unwrap();
    let cap = HookCapture {
        streams,
        problems: Vec::new(),
    };
    let usdt = (!usdt.is_empty()).then(|| {
        UsdtEvents::from_events(
            Meta {
                complete: true,
                ..Meta::default()
            },
            usdt,
        )
    });
    merge(usdt, &cap, "/usr/bin/python", &plan)
}

fn count(t: &Trace, name: &str) -> u64 {
    t.meta.counts.get(name).copied().unwrap_or(0)
}

/// The merge of a 3.15 process traced whole (scope `run`) whose hook defined `codes` and sent
/// `inside` within one test's window (from 1 to 99), and `usdt`.
fn merged_315_test(codes: &[&str], inside: &[&str], usdt: Vec<UsdtEvent>) -> Trace {
    let h = hello(7, "3.15.2", "generators", "run", "");
    let mut lines = vec![h.as_str()];
    lines.extend_from_slice(codes);
    lines.push(r#"["ts",1,1,"t.py::test"]"#);
    lines.extend_from_slice(inside);
    lines.push(r#"["te",99,1,"t.py::test","passed"]"#);
    merged(PY315, Scope::Run, vec![stream(&lines)], usdt)
}

/// Rule `before-hook` (`hookless-child`, the 3.15 suite's parts 13 and 41 since stop 55): a
/// process whose hook sent a hello and a bye and nothing timed (a child a test started, which
/// never enters a window of its own) is hooked: its USDT events (start-up, before its hook
/// zeroed the probes) are left out by the scope rules, not a problem. A process with no stream
/// at all is still one.
#[test]
fn a_process_whose_hook_recorded_nothing_is_hooked_and_one_without_a_stream_is_not() {
    let h = hello(7, "3.15.2", "generators", "targets", r#""lineless""#);
    let events = || {
        vec![
            usdt(10, 7, Kind::Call, "f", 1),
            usdt(20, 7, Kind::Return, "f", 3),
        ]
    };
    let t = merged(PY315, Scope::Targets, vec![stream(&[&h])], events());
    assert!(t.meta.problems.is_empty(), "{:?}", t.meta.problems);
    assert!(t.meta.complete && t.events.is_empty());
    assert_eq!(count(&t, "merge.events_outside_test_windows"), 2);
    let t = merged(PY315, Scope::Targets, Vec::new(), events());
    assert!(
        t.meta.problems.iter().any(|p| p.contains("no hook stream")),
        "{:?}",
        t.meta.problems
    );
    assert!(!t.meta.complete);
}

/// Rule `timeline`: one thread's records of both witnesses are taken in time order, the
/// hook's first at equal times (its callback runs before the probe of the same instruction).
/// Here 3.11's USDT return of `f` is stamped with the hook's record of that end: taken first,
/// it would close `f` on its own and leave the hook's record nothing to join.
#[test]
fn both_witnesses_are_taken_in_time_order_the_hook_first_at_equal_times() {
    let h = hello(7, "3.11.2", "entries", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,3,4]"#,
        r#"["c",10,1,1,100,1]"#,
        r#"["r",20,1,1,100,3,"return",["3","int"],null]"#,
    ]);
    let t = merged(
        PY311,
        Scope::Run,
        vec![st],
        vec![usdt(20, 1, Kind::Return, "f", 3)],
    );
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let ret: Vec<(Source, Option<&str>)> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Return)
        .map(|e| (e.src, e.detail().value.as_ref().map(|v| v.repr.as_str())))
        .collect();
    assert_eq!(
        ret,
        [(Source::Usdt, Some("3"))],
        "USDT's return, the hook's value"
    );
    assert_eq!(count(&t, "merge.returns_joined"), 1);
}

/// Rule `activation-stack`: a call opens an activation under the running one; a return
/// closes the top activation of its code, so a recursive call's return closes the inner one.
#[test]
fn a_return_closes_the_top_activation_of_its_code() {
    let t = merged_315_test(
        &[],
        &[],
        vec![
            usdt(10, 1, Kind::Call, "f", 1),
            usdt(11, 1, Kind::Call, "f", 1),
            usdt(12, 1, Kind::Call, "g", 5),
            usdt(13, 1, Kind::Return, "g", 6),
            usdt(14, 1, Kind::Return, "f", 2),
            usdt(15, 1, Kind::Return, "f", 2),
        ],
    );
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let code: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| matches!(e.ev, Kind::Call | Kind::Return))
        .collect();
    let (outer, inner, g) = (code[0].activation, code[1].activation, code[2].activation);
    let got: Vec<(Kind, &str, u32, u64, u64, bool)> = code
        .iter()
        .map(|e| {
            (
                e.ev,
                e.func().as_str(),
                e.depth,
                e.activation,
                e.parent,
                e.unwind,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Kind::Call, "f", 0, outer, 0, false),
            (Kind::Call, "f", 1, inner, outer, false),
            (Kind::Call, "g", 2, g, inner, false),
            (Kind::Return, "g", 2, g, inner, false),
            (Kind::Return, "f", 1, inner, outer, false),
            (Kind::Return, "f", 0, outer, 0, false),
        ]
    );
}

/// Rule `generator-frames`: a resumption (the hook's `c` of a suspended frame's key) is a
/// new activation of the same frame.
#[test]
fn a_resumption_keeps_its_frames_id() {
    let h = hello(7, "3.13.5", "all", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","g","g",1,3,1]"#,
        r#"["c",10,1,1,500,1,"new"]"#,
        r#"["r",11,1,1,500,2,"yield",["1","int"],null]"#,
        r#"["c",12,1,1,500,2]"#,
        r#"["r",13,1,1,500,3,"return",["None","NoneType"],null]"#,
    ]);
    let t = merged(PY313, Scope::Run, vec![st], Vec::new());
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let calls: Vec<(u64, u64)> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Call)
        .map(|e| (e.activation, e.frame))
        .collect();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].0, calls[1].0, "two activations");
    assert_eq!(calls[1].1, calls[0].1, "of one frame: {calls:?}");
    assert_eq!(
        calls[0].1, calls[0].0,
        "the frame is its first activation's"
    );
}

/// Rule `hook-lines-win`: the lines of code the hook traces (with their values) come from the
/// hook, USDT's lines of it are dropped, counted; USDT's lines of other code stay. (No recorded
/// run has USDT lines: the plan attaches no line probe with the hook.)
#[test]
fn the_hooks_lines_win_over_usdts_lines_of_the_same_code() {
    let h = hello(7, "3.11.2", "entries", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,4,4]"#,
        r#"["C",2,"/t.py","g","g",10,12,0]"#,
        r#"["c",10,1,1,100,1]"#,
        r#"["l",11,1,1,100,2,{"x":["1","int"]}]"#,
        r#"["c",20,1,2,200,10]"#,
        r#"["r",30,1,1,100,4,"return",["1","int"],null]"#,
    ]);
    let t = merged(
        PY311,
        Scope::Run,
        vec![st],
        vec![
            usdt(12, 1, Kind::Line, "f", 2),
            usdt(21, 1, Kind::Line, "g", 11),
            usdt(25, 1, Kind::Return, "g", 12),
            usdt(30, 1, Kind::Return, "f", 4),
        ],
    );
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let lines: Vec<(&str, u32, Source)> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Line)
        .map(|e| (e.func().as_str(), e.line, e.src))
        .collect();
    assert_eq!(lines, [("f", 2, Source::Hook), ("g", 11, Source::Usdt)]);
    assert_eq!(count(&t, "merge.usdt_lines_dropped_for_hook_lines"), 1);
}

/// Rule `unseen-thread` (3.11): the hook reports every start in the threads it traces; a
/// thread with USDT events and no hook record ran untraced (`_thread.start_new_thread`): its
/// calls are missing, the trace is incomplete.
#[test]
fn a_thread_the_hook_never_traced_is_a_problem() {
    let h = hello(7, "3.11.2", "entries", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,3,4]"#,
        r#"["c",10,1,1,100,1]"#,
        r#"["r",20,1,1,100,3,"return",["3","int"],null]"#,
    ]);
    let t = merged(
        PY311,
        Scope::Run,
        vec![st],
        vec![
            usdt(15, 2, Kind::Return, "h", 3),
            usdt(20, 1, Kind::Return, "f", 3),
        ],
    );
    assert!(!t.meta.complete);
    assert!(
        t.meta
            .problems
            .iter()
            .any(|p| p.contains("thread 7/2") && p.contains("never traced")),
        "{:?}",
        t.meta.problems
    );
}

/// Rule `extent-edges`: nothing of the thread's is open between extents of targeted code; an
/// activation still open at an extent's edge is a problem, never closed silently.
#[test]
fn an_activation_open_at_an_extents_edge_is_a_problem() {
    let h = hello(7, "3.13.5", "all", "targets", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,3,4]"#,
        r#"["wo",1,1]"#,
        r#"["xo",5,1]"#,
        r#"["c",10,1,1,100,1]"#,
        r#"["xc",20,1]"#,
        r#"["wc",30,1]"#,
    ]);
    let t = merged(PY313, Scope::Targets, vec![st], Vec::new());
    assert!(!t.meta.complete);
    assert!(
        t.meta
            .problems
            .iter()
            .any(|p| p.contains("activation of f") && p.contains("end of a target extent")),
        "{:?}",
        t.meta.problems
    );
}

/// Rule `never-returned`: an activation still open when its thread's timeline ends (nothing
/// reported its end) is a problem.
#[test]
fn an_activation_open_at_the_threads_end_is_a_problem() {
    let h = hello(7, "3.13.5", "all", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,3,0]"#,
        r#"["c",10,1,1,100,1]"#,
    ]);
    let t = merged(PY313, Scope::Run, vec![st], Vec::new());
    assert!(!t.meta.complete);
    assert!(
        t.meta
            .problems
            .iter()
            .any(|p| p.contains("activation of f") && p.contains("never returned")),
        "{:?}",
        t.meta.problems
    );
}

/// Rule `identify`: USDT names code by file, name and line only; the first hook record of an
/// activation USDT opened names its code object exactly (here a method whose USDT entry line
/// is not its `co_firstlineno`, a decorator's line).
#[test]
fn the_first_hook_record_of_an_activation_names_its_code() {
    let t = merged_315_test(
        &[r#"["C",1,"/t.py","f","C.f",4,8,4]"#],
        &[
            r#"["l",11,1,1,100,6,null]"#,
            r#"["r",20,1,1,100,7,"return",["1","int"],null]"#,
        ],
        vec![
            usdt(10, 1, Kind::Call, "f", 5),
            usdt(21, 1, Kind::Return, "f", 7),
        ],
    );
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let call = t.events.iter().find(|e| e.ev == Kind::Call).unwrap();
    assert_eq!(
        (call.src, call.qualname().as_str(), call.line),
        (Source::Usdt, "C.f", 5)
    );
}

/// Rule `checks`: a predicate's `k` record is a `check` event of its activation: its value
/// `True`/`False`, or the exception evaluating it raised.
#[test]
fn a_predicates_record_is_a_check_event_of_its_activation() {
    let h = hello(7, "3.13.5", "all", "run", "");
    let st = stream(&[
        &h,
        r#"["C",1,"/t.py","f","f",1,4,4]"#,
        r#"["c",10,1,1,100,1]"#,
        r#"["k",11,1,1,100,2,"x > 0",true]"#,
        r#"["k",12,1,1,100,3,"y.z",["error","NameError"]]"#,
        r#"["r",13,1,1,100,4,"return",["None","NoneType"],null]"#,
    ]);
    let t = merged(PY313, Scope::Run, vec![st], Vec::new());
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let f = t
        .events
        .iter()
        .find(|e| e.ev == Kind::Call)
        .unwrap()
        .activation;
    let checks: Vec<_> = t
        .events
        .iter()
        .filter(|e| e.ev == Kind::Check)
        .map(|e| {
            (
                e.line,
                e.detail().predicate.as_str(),
                e.activation,
                e.detail().value.as_ref().map(|v| v.repr.as_str()),
                e.detail().exc.as_ref().map(|x| x.ty.as_str()),
            )
        })
        .collect();
    assert_eq!(
        checks,
        [
            (2, "x > 0", f, Some("True"), None),
            (3, "y.z", f, None, Some("NameError")),
        ]
    );
}

/// Rule `static-facts`: every process computes a targeted file's facts from the same file;
/// the trace keeps the first stream's.
#[test]
fn a_files_static_facts_are_the_first_streams() {
    let streams = ["first", "second"]
        .iter()
        .zip([7u32, 8])
        .map(|(sha, pid)| {
            let h = hello(pid, "3.13.5", "all", "run", "");
            let f = format!(r#"["F","/t.py",{{"file":"/t.py","sha256":"{sha}"}}]"#);
            stream(&[&h, &f])
        })
        .collect();
    let t = merged(PY313, Scope::Run, streams, Vec::new());
    assert_eq!(t.facts["/t.py"].sha256, "first");
}

/// Rule `unwind-reconcile` (3.15: no return probe fires on an exception exit): a USDT return
/// of a frame lower in the stack closes the ones above it as unwound, inferred and counted.
#[test]
fn a_return_lower_in_the_stack_closes_the_frames_above_as_unwound() {
    let t = merged_315_test(
        &[],
        &[],
        vec![
            usdt(10, 1, Kind::Call, "f", 1),
            usdt(11, 1, Kind::Call, "g", 5),
            usdt(15, 1, Kind::Return, "f", 3),
        ],
    );
    assert!(t.meta.complete, "{:?}", t.meta.problems);
    let got: Vec<(Kind, &str, u32, bool)> = t
        .events
        .iter()
        .filter(|e| matches!(e.ev, Kind::Call | Kind::Return))
        .map(|e| (e.ev, e.func().as_str(), e.depth, e.unwind))
        .collect();
    assert_eq!(
        got,
        [
            (Kind::Call, "f", 0, false),
            (Kind::Call, "g", 1, false),
            (Kind::Return, "g", 1, true),
            (Kind::Return, "f", 0, false),
        ]
    );
    assert_eq!(count(&t, "merge.reconciled_unwind"), 1);
}

/// Rule `shared-first-line`: USDT names code by file, name and line; two code objects that
/// share all three (a lambda nested in a lambda on one line, as SymPy's `_futrig` has) cannot
/// be told apart by an entry, so its activation gets no qualified name of either (the name
/// alone), whichever the hook defined last. It named one of them before, by the order of a
/// hash map: a different one from run to run, so a callee answer could name the wrong code.
#[test]
fn an_entry_of_one_of_two_codes_sharing_a_first_line_names_neither() {
    for codes in [
        [
            r#"["C",1,"/t.py","<lambda>","f.<locals>.<lambda>",5,5,0]"#,
            r#"["C",2,"/t.py","<lambda>","f.<locals>.<lambda>.<locals>.<lambda>",5,5,0]"#,
        ],
        [
            r#"["C",2,"/t.py","<lambda>","f.<locals>.<lambda>.<locals>.<lambda>",5,5,0]"#,
            r#"["C",1,"/t.py","<lambda>","f.<locals>.<lambda>",5,5,0]"#,
        ],
    ] {
        let t = merged_315_test(
            &codes,
            &[],
            vec![
                usdt(10, 1, Kind::Call, "<lambda>", 5),
                usdt(20, 1, Kind::Return, "<lambda>", 5),
            ],
        );
        assert!(t.meta.complete, "{:?}", t.meta.problems);
        let call = t.events.iter().find(|e| e.ev == Kind::Call).unwrap();
        assert_eq!((call.qualname().as_str(), call.name()), ("", "<lambda>"));
    }
}

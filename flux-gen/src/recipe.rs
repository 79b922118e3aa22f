//! A question kind's recipe: everything flux gen knows of a kind, in one place — the
//! extractors its questions name (their rows, with the kind in their `kinds`, are in
//! `flux_extract::registry`), its drafting rule (which questions a target's trace supports, with
//! which parameters: [`KindRecipe::draft`]) and its prose ([`KindRecipe::prose`], the words of
//! its question under its kind's preamble, `flux_instance::preamble`).
//!
//! [`recipe`] is an exhaustive `match`, so a kind without a recipe does not compile; [`RECIPES`]
//! holds every recipe once in drafting order, and the tests check it, and that each recipe's
//! extractors are registered for its kind. Adding a kind touches three files: its variant in
//! `flux_extract::kinds`, its extractors' rows in `flux_extract::registry`, and its recipe here
//! (a new extractor adds its own module in flux-extract; a new family of conventions, named by
//! `QuestionKind::family`, its preamble in `flux_instance::preamble`, whose tests check that
//! every kind's family has one).
//!
//! A calls-only runtime (the JVM's) drafts the call kinds with its own joint rule
//! ([`crate::calls_only`]: one traced run answers S6 and M6 together) and says them with these
//! recipes' prose, in its own words ([`Say`]: methods of a package, no lines).
use crate::author::{code, list_and, nth, Say};
use crate::draft::{Draft, Scene};
use crate::keyed::Rng;
use flux_extract::QuestionKind as K;
use flux_trace::Kind;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A step on a draft once its gold is known, given the functions the shared trace targeted
/// (qualname → file).
pub type AfterGold = fn(&mut Draft, &Value, &BTreeMap<String, String>);

/// One kind's drafting rule and prose.
pub struct KindRecipe {
    pub kind: K,
    /// The extractors its drafts name.
    pub extractors: &'static [&'static str],
    /// The drafts about a scene's target (its tests' sub-trace), drawing from the module's
    /// seeded generator for the target (shared by the kinds drafted before it: see
    /// [`RECIPES`]).
    pub draft: fn(&Scene, &mut Rng) -> Vec<Draft>,
    /// After the gold is known: what else the draft's tracing must follow (an exception's
    /// frames), or nothing.
    pub after_gold: Option<AfterGold>,
    /// The question's body: what to compute, in plain words (the run clause comes before it).
    pub prose: fn(&Say) -> String,
}

/// The recipe of `kind`: exhaustive, so a kind without one does not compile.
pub fn recipe(kind: K) -> &'static KindRecipe {
    match kind {
        K::S1 => &S1,
        K::S2 => &S2,
        K::S3 => &S3,
        K::S4 => &S4,
        K::S5 => &S5,
        K::S6 => &S6,
        K::S7 => &S7,
        K::M1 => &M1,
        K::M2 => &M2,
        K::M3 => &M3,
        K::M4 => &M4,
        K::M5 => &M5,
        K::M6 => &M6,
        K::M7 => &M7,
    }
}

/// Every recipe once, in drafting order: the single-test kinds of a target draw in turn from
/// one seeded generator, the multi-test kinds from another, so each kind's draws depend on
/// those before it. The order is v1's (M7 after M3, where it shared M3's observations); moving
/// a kind changes the questions of the kinds after it.
pub static RECIPES: [&KindRecipe; 14] = [
    &S1, &S2, &S3, &S4, &S5, &S6, &S7, &M1, &M2, &M3, &M7, &M4, &M5, &M6,
];

/// S1 `executed_path`: ≥ 2 branches; an invocation of 3..=`max_answer_size` lines.
/// `covered_lines`: ≥ 1 branch or ≥ 5 statements.
const S1: KindRecipe = KindRecipe {
    kind: K::S1,
    extractors: &["executed_path", "covered_lines"],
    draft: |s, _| {
        let t = s.ctx.target;
        let lines = s.lines(&s.invs[s.inv]);
        let mut out = Vec::new();
        if t.branches >= 2 && (3..=s.ctx.max_answer_size).contains(&lines.len()) {
            out.push(s.draft(K::S1, "executed_path", s.with_inv(s.with_test(s.base()))));
        }
        if t.branches >= 1 || t.statements >= 5 {
            out.push(s.draft(K::S1, "covered_lines", s.with_test(s.base())));
        }
        out
    },
    after_gold: None,
    prose: |w| match w.ask.extractor {
        "executed_path" => format!(
            "Which lines of {} execute during {}, in execution order?",
            w.f, w.inv
        ),
        _ => format!("Which lines of {} are covered during the test?", w.f),
    },
};

/// Iterations of the loop `header`..=`body_end` in `lines` (an invocation's): the header
/// followed by a line of its body.
fn iterations(lines: &[u32], header: u32, body_end: u32) -> usize {
    lines
        .windows(2)
        .filter(|w| w[0] == header && w[1] > header && w[1] <= body_end)
        .count()
}

/// S2 `loop_iterations`: a loop that iterates ≥ 2 times in some invocation (the first such).
const S2: KindRecipe = KindRecipe {
    kind: K::S2,
    extractors: &["loop_iterations"],
    draft: |s, rng| {
        let mut loops: Vec<_> = s.ctx.file.loops_of(&s.ctx.target.qualname).collect();
        rng.shuffle(&mut loops);
        for l in &loops {
            let body_end = l.body[1];
            for (i, inv) in s.invs.iter().enumerate() {
                if iterations(&s.lines(inv), l.line, body_end) >= 2 {
                    let mut p = s.with_test(s.base());
                    p.insert("invocation".into(), json!(i + 1));
                    p.insert("header".into(), json!(l.line));
                    p.insert("body_end".into(), json!(body_end));
                    return vec![s.draft(K::S2, "loop_iterations", p)];
                }
            }
        }
        Vec::new()
    },
    after_gold: None,
    prose: |w| {
        format!(
            "How many iterations does {} of {} perform in {}?",
            w.the_loop(),
            w.f,
            w.inv
        )
    },
};

/// S3 `state_at`: a line with assignments that runs in the invocation (one of its first
/// three executions); up to three of the names it assigns.
const S3: KindRecipe = KindRecipe {
    kind: K::S3,
    extractors: &["state_at"],
    draft: |s, rng| {
        let func = s.ctx.func;
        let mut writes: Vec<(u32, Vec<String>, usize)> = Vec::new();
        for line in s.changing_lines(&s.invs[s.inv]) {
            let names: Vec<String> = func
                .writes_at(line)
                .iter()
                .filter(|v| !v.starts_with("__"))
                .cloned()
                .collect();
            if names.is_empty() || line == func.def_line {
                continue;
            }
            match writes.iter_mut().find(|w| w.0 == line) {
                Some(w) => w.2 += 1,
                None => writes.push((line, names, 1)),
            }
        }
        let Some((line, names, times)) = rng.pick(&writes).cloned() else {
            return Vec::new();
        };
        let mut p = s.with_inv(s.with_test(s.base()));
        p.insert("line".into(), json!(line));
        p.insert("occurrence".into(), json!(1 + rng.below(times.min(3))));
        let names: Vec<String> = names.into_iter().take(3).collect();
        p.insert("variables".into(), json!(names));
        vec![s.draft(K::S3, "state_at", p)]
    },
    after_gold: None,
    prose: |w| {
        let vars: Vec<String> = w
            .ask
            .params
            .get("variables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(code)
            .collect();
        format!(
            "In {} of {}, what {} right after line {} executes for the {} time?",
            w.inv,
            w.f,
            if vars.len() == 1 {
                format!("is the value of the local variable {}", vars[0])
            } else {
                format!("are the values of the local variables {}", list_and(&vars))
            },
            w.int("line"),
            nth(w.int("occurrence"))
        )
    },
};

/// `uses` for a def-use question: one or two variables assigned on two lines or more (a
/// parameter counts its def line), with every line that reads them (reads of its own and of
/// nested scopes, from the static facts).
fn def_use_uses(s: &Scene, rng: &mut Rng) -> Option<Value> {
    use crate::facts::FunctionFactsExt;
    let f = s.ctx.func;
    let mut defs: BTreeMap<String, usize> = BTreeMap::new();
    for names in f.writes.values() {
        for n in names {
            *defs.entry(n.clone()).or_insert(0) += 1;
        }
    }
    let uses = f.uses();
    let mut vars: Vec<String> = defs
        .into_iter()
        .filter(|(n, d)| {
            *d >= 2 && uses.values().filter(|u| u.contains(n)).count() >= 1 && !n.starts_with("__")
        })
        .map(|(n, _)| n)
        .collect();
    if vars.is_empty() {
        return None;
    }
    rng.shuffle(&mut vars);
    vars.truncate(2);
    vars.sort();
    let mut m = Map::new();
    for (line, names) in &uses {
        let chosen: Vec<&String> = names.iter().filter(|n| vars.contains(n)).collect();
        if !chosen.is_empty() {
            m.insert(line.to_string(), json!(chosen));
        }
    }
    Some(Value::Object(m))
}

/// `(variables, "of `x` at lines 3 and 5; of `y` at line 4")`: the reads that count as uses.
fn uses_clause(p: &Map<String, Value>) -> (Vec<String>, String) {
    let mut by_var: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    if let Some(Value::Object(m)) = p.get("uses") {
        for (line, names) in m {
            let l: u64 = line.parse().unwrap_or(0);
            for n in names
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                by_var.entry(n.to_string()).or_default().push(l);
            }
        }
    }
    let vars: Vec<String> = by_var.keys().map(|v| code(v)).collect();
    let parts: Vec<String> = by_var
        .iter()
        .map(|(v, ls)| {
            let mut ls = ls.clone();
            ls.sort();
            let ls: Vec<String> = ls.iter().map(u64::to_string).collect();
            format!(
                "of {} at line{} {}",
                code(v),
                if ls.len() > 1 { "s" } else { "" },
                list_and(&ls)
            )
        })
        .collect();
    (vars, parts.join("; "))
}

/// S4 `def_use_pairs`: one or two variables assigned on ≥ 2 lines (or a parameter and a
/// line), read elsewhere ([`def_use_uses`]), in the invocation.
const S4: KindRecipe = KindRecipe {
    kind: K::S4,
    extractors: &["def_use_pairs"],
    draft: |s, rng| {
        let Some(uses) = def_use_uses(s, rng) else {
            return Vec::new();
        };
        let mut p = s.with_inv(s.with_test(s.base()));
        p.insert("uses".into(), uses);
        vec![s.draft(K::S4, "def_use_pairs", p)]
    },
    after_gold: None,
    prose: |w| {
        let (vars, uses) = uses_clause(w.ask.params);
        format!(
            "Which def-use pairs of {} occur in {} of {}, and how often each? {}; the uses are \
             the reads {uses}.",
            list_and(&vars),
            w.inv,
            w.f,
            w.args()
        )
    },
};

/// Exceptions the interpreter uses as signals (a generator closed or exhausted): not asked
/// about, their raise sites are the interpreter's, not the code's.
pub(crate) fn signal(ty: &str) -> bool {
    matches!(
        ty.rsplit('.').next().unwrap_or(ty),
        "GeneratorExit" | "StopIteration" | "StopAsyncIteration"
    )
}

/// The exceptions raised (not propagated into, nor thrown into) in the target's frames, by
/// type, with the tests they were raised in (one entry per raise): the raises of
/// `exception_info` and `raising_tests` (issue 23.2), signals aside.
fn raised<'a>(s: &'a Scene) -> BTreeMap<String, Vec<&'a str>> {
    let raises = s.raises();
    let mut out: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for inv in &s.invs {
        for &i in &inv.events {
            let e = &s.sub.events[i];
            if e.ev != Kind::Exception || !raises.contains(&i) {
                continue;
            }
            if let Some(x) = e.detail().exc.as_ref().filter(|x| !signal(&x.ty)) {
                out.entry(x.ty.clone()).or_default().push(inv.test.as_str());
            }
        }
    }
    out
}

/// The exceptions that leave the target (an invocation of it ends by unwinding with them), by
/// type, with the tests they left it in: what `raising_tests` counts with `escapes`.
fn escaped<'a>(s: &'a Scene) -> BTreeMap<String, Vec<&'a str>> {
    let mut out: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for inv in &s.invs {
        for &i in &inv.events {
            let e = &s.sub.events[i];
            if e.ev != Kind::Return || !e.unwind {
                continue;
            }
            if let Some(x) = e.detail().exc.as_ref().filter(|x| !signal(&x.ty)) {
                out.entry(x.ty.clone()).or_default().push(inv.test.as_str());
            }
        }
    }
    out
}

/// S5 `exception_info`: an exception raised in the target during the test ([`raised`]), one
/// of its first three raises.
const S5: KindRecipe = KindRecipe {
    kind: K::S5,
    extractors: &["exception_info"],
    draft: |s, rng| {
        let types: Vec<(String, usize)> = raised(s)
            .into_iter()
            .map(|(ty, ts)| (ty, ts.len()))
            .collect();
        let Some((ty, count)) = rng.pick(&types).cloned() else {
            return Vec::new();
        };
        let mut p = Map::new();
        p.insert("type".into(), json!(ty));
        p.insert("raised_in".into(), json!(s.ctx.target.qualname));
        p.insert("test".into(), json!(s.tests[0]));
        p.insert("occurrence".into(), json!(1 + rng.below(count.min(3))));
        vec![s.draft(K::S5, "exception_info", p)]
    },
    after_gold: Some(exception_functions),
    prose: |w| {
        let mut fs: Vec<String> = w.ask.functions.iter().map(|f| code(f)).collect();
        fs.sort();
        format!(
            "Take the {} exception of type {} raised in {} during the test, followed through the \
             frames of {}. What are its type and message, the function and line raising it, the \
             function handling it and the line of its `except` clause, and the frames it \
             unwinds?",
            nth(w.int("occurrence")),
            code(w.s("type")),
            w.f,
            list_and(&fs)
        )
    },
};

/// After the gold is known: the functions an exception question's config must target (the
/// targeted frames the exception passed through: where it was raised, the frames it unwound,
/// where it was handled), so the instance's own trace follows it as far as the shared one did.
pub fn exception_functions(draft: &mut Draft, gold: &Value, targeted: &BTreeMap<String, String>) {
    let Some(x) = gold.get("exception") else {
        return;
    };
    let mut fs: Vec<String> = draft.functions.clone();
    let mut add = |q: Option<&str>| {
        if let Some(q) = q {
            if targeted.contains_key(q) && !fs.iter().any(|f| f == q) {
                fs.push(q.to_string());
            }
        }
    };
    add(x.get("raised_in").and_then(Value::as_str));
    for u in x
        .get("unwound")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(u.as_str());
    }
    add(x.get("handled_in").and_then(Value::as_str));
    draft.functions = fs;
}

/// S6 `call_sequence`, `callees_count`: ≥ 2 calls into the repository's code. S6
/// `call_graph` is drafted from the scout, not the shared trace ([`call_graph`]).
const S6: KindRecipe = KindRecipe {
    kind: K::S6,
    extractors: &["call_sequence", "callees_count", "call_graph"],
    draft: |s, _| {
        if s.ctx.target.repo_callees < 2 {
            return Vec::new();
        }
        let mut p = s.with_inv(s.with_test(s.base()));
        p.insert("within".into(), json!(s.ctx.within));
        vec![
            s.draft(K::S6, "call_sequence", p.clone()),
            s.draft(K::S6, "callees_count", p),
        ]
    },
    after_gold: None,
    prose: |w| match w.ask.extractor {
        "call_graph" => format!(
            "What is the test's dynamic call graph among the {}?",
            w.graph
        ),
        "call_sequence" => format!(
            "Which {} does {} call directly during {}, in call order{}?",
            w.callees,
            w.f,
            w.inv,
            if w.lines {
                ", and from which of its lines"
            } else {
                ""
            }
        ),
        _ => format!(
            "Which {} does {} call directly during {}, and how many times each?",
            w.callees, w.f, w.inv
        ),
    },
};

/// A call-graph question (S6 `call_graph`) about one test, from the scout's trace (it needs
/// every call of the test, with qualnames: the hook's; USDT-only calls name code objects by
/// `co_name`): the edges among the repository's functions; with `qualify`, names carry their
/// module (a JVM's package).
pub fn call_graph(test: &str, within: &str, qualify: bool) -> Draft {
    let mut p = Map::new();
    p.insert("test".into(), json!(test));
    p.insert("within".into(), json!(within));
    if qualify {
        // Methods by their package too (`org.x.Foo.bar`): TraceEval's qualified names.
        p.insert("qualify".into(), json!("module"));
    }
    let mut d = crate::draft::draft(K::S6, "call_graph", p, &[test.to_string()], "");
    d.functions = Vec::new();
    d
}

fn numeric(ty: &str) -> bool {
    matches!(ty, "int" | "float" | "bool")
}

/// A question of `what` about one (line, variable) picked among `cands`: `p` with them.
fn on_line_variable(
    s: &Scene,
    rng: &mut Rng,
    what: (K, &'static str),
    cands: &[&(u32, String)],
    mut p: Map<String, Value>,
) -> Vec<Draft> {
    let Some((line, var)) = rng.pick(cands) else {
        return Vec::new();
    };
    p.insert("line".into(), json!(line));
    p.insert("variable".into(), json!(var));
    vec![s.draft(what.0, what.1, p)]
}

/// S7 `invariants_in_test`: a (line, variable) observed ≥ 3 times in the test, numbers first.
const S7: KindRecipe = KindRecipe {
    kind: K::S7,
    extractors: &["invariants_in_test"],
    draft: |s, rng| {
        let obs = s.observations();
        let mut cands: Vec<_> = obs.iter().filter(|(_, v)| v.len() >= 3).collect();
        // Numbers first: what the invariants say most about.
        cands.sort_by_key(|(k, v)| (!v.iter().all(|o| numeric(&o.2)), k.0, k.1.clone()));
        let numeric_first: Vec<_> = if cands.iter().any(|(_, v)| v.iter().all(|o| numeric(&o.2))) {
            cands
                .iter()
                .filter(|(_, v)| v.iter().all(|o| numeric(&o.2)))
                .cloned()
                .collect()
        } else {
            cands.clone()
        };
        let keys: Vec<&(u32, String)> = numeric_first.iter().map(|(k, _)| *k).collect();
        let p = s.with_test(s.base());
        on_line_variable(s, rng, (K::S7, "invariants_in_test"), &keys, p)
    },
    after_gold: None,
    prose: |w| {
        format!(
            "Observe the local variable {} of {} right after each execution of line {} during \
             the test. What are the invariants of these observations?",
            code(w.s("variable")),
            w.f,
            w.int("line")
        )
    },
};

/// M1 `coverage_across_tests`: ≥ 2 tests; with `line` when a line runs in some of them and
/// not in others (a branch that goes both ways across tests).
const M1: KindRecipe = KindRecipe {
    kind: K::M1,
    extractors: &["coverage_across_tests"],
    draft: |s, rng| {
        let mut covered: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
        for inv in &s.invs {
            for l in s.lines(inv) {
                covered.entry(l).or_default().insert(inv.test.as_str());
            }
        }
        let split: Vec<u32> = covered
            .iter()
            .filter(|(_, ts)| ts.len() < s.tests.len())
            .map(|(l, _)| *l)
            .collect();
        let mut p = s.base();
        if let Some(l) = rng.pick(&split) {
            p.insert("line".into(), json!(l));
        }
        vec![s.draft(K::M1, "coverage_across_tests", p)]
    },
    after_gold: None,
    prose: |w| match w.ask.params.contains_key("line") {
        true => format!(
            "Which of these tests execute line {} of {}?",
            w.int("line"),
            w.f
        ),
        false => format!(
            "For each test, which lines of {} are covered while it runs?",
            w.f
        ),
    },
};

/// M2 `loop_iterations_across_tests`: a loop iterating ≥ 2 times in some test.
const M2: KindRecipe = KindRecipe {
    kind: K::M2,
    extractors: &["loop_iterations_across_tests"],
    draft: |s, rng| {
        let mut loops: Vec<_> = s.ctx.file.loops_of(&s.ctx.target.qualname).collect();
        rng.shuffle(&mut loops);
        for l in loops {
            let body_end = l.body[1];
            let most = s
                .invs
                .iter()
                .map(|inv| iterations(&s.lines(inv), l.line, body_end))
                .max()
                .unwrap_or(0);
            if most >= 2 {
                let mut p = s.base();
                p.insert("header".into(), json!(l.line));
                p.insert("body_end".into(), json!(body_end));
                return vec![s.draft(K::M2, "loop_iterations_across_tests", p)];
            }
        }
        Vec::new()
    },
    after_gold: None,
    prose: |w| {
        format!(
            "For each test, count the iterations of {} of {} over all its invocations. What are \
             the smallest and the largest totals, and which tests attain each?",
            w.the_loop(),
            w.f
        )
    },
};

/// Tests with an observation among `v`.
fn in_tests(v: &[(String, String, String)]) -> usize {
    v.iter()
        .map(|o| o.0.as_str())
        .collect::<BTreeSet<&str>>()
        .len()
}

/// M3 `state_across_tests`: a (line, variable) reached in ≥ 2 tests whose first values differ
/// between tests.
const M3: KindRecipe = KindRecipe {
    kind: K::M3,
    extractors: &["state_across_tests"],
    draft: |s, rng| {
        let differing: Vec<&(u32, String)> = s
            .observations()
            .iter()
            .filter(|(_, v)| {
                in_tests(v) >= 2 && {
                    // The first value of each test: do two tests differ?
                    let mut firsts: BTreeMap<&str, &str> = BTreeMap::new();
                    for o in v.iter() {
                        firsts.entry(o.0.as_str()).or_insert(o.1.as_str());
                    }
                    firsts.values().collect::<BTreeSet<_>>().len() >= 2
                }
            })
            .map(|(k, _)| k)
            .collect();
        on_line_variable(s, rng, (K::M3, "state_across_tests"), &differing, s.base())
    },
    after_gold: None,
    prose: |w| {
        format!(
            "For each test in which line {} of {} executes, what is the value of the local \
             variable {} right after the line's first execution in that test?",
            w.int("line"),
            w.f,
            code(w.s("variable"))
        )
    },
};

/// M4 `def_use_across_tests`: as S4, over ≥ 2 tests.
const M4: KindRecipe = KindRecipe {
    kind: K::M4,
    extractors: &["def_use_across_tests"],
    draft: |s, rng| {
        let Some(uses) = def_use_uses(s, rng) else {
            return Vec::new();
        };
        let mut p = s.base();
        p.insert("uses".into(), uses);
        vec![s.draft(K::M4, "def_use_across_tests", p)]
    },
    after_gold: None,
    prose: |w| {
        let (vars, uses) = uses_clause(w.ask.params);
        format!(
            "Which def-use pairs of {} occur in {} during these tests, and in which tests? {}; \
             the uses are the reads {uses}.",
            list_and(&vars),
            w.f,
            w.args()
        )
    },
};

/// M5 `raising_tests`: an exception type raised in the target ([`raised`]) in some of the
/// tests, not all; where the target raises none, an exception type that leaves it (an
/// invocation ends by it: [`escaped`], the extractor's `escapes`) in some of the tests, not all.
const M5: KindRecipe = KindRecipe {
    kind: K::M5,
    extractors: &["raising_tests"],
    draft: |s, rng| {
        let some_not_all = |by_type: BTreeMap<String, Vec<&str>>| -> Vec<String> {
            by_type
                .into_iter()
                .filter(|(_, ts)| ts.iter().collect::<BTreeSet<_>>().len() < s.tests.len())
                .map(|(ty, _)| ty)
                .collect()
        };
        let mut p = Map::new();
        let raised_types = some_not_all(raised(s));
        if let Some(ty) = rng.pick(&raised_types) {
            p.insert("type".into(), json!(ty));
            p.insert("raised_in".into(), json!(s.ctx.target.qualname));
        } else if s.ctx.exceptions == crate::spec::Exceptions::OwnAsks {
            let escaped_types = some_not_all(escaped(s));
            let Some(ty) = rng.pick(&escaped_types) else {
                return Vec::new();
            };
            p.insert("type".into(), json!(ty));
            p.insert("escapes".into(), json!(s.ctx.target.qualname));
        } else {
            return Vec::new();
        }
        vec![s.draft(K::M5, "raising_tests", p)]
    },
    after_gold: None,
    prose: |w| {
        if w.s("escapes").is_empty() {
            format!(
                "In which of these tests is an exception of type {} raised in {}?",
                code(w.s("type")),
                w.f
            )
        } else {
            format!(
                "In which of these tests does an invocation of {} end by an exception of type {} \
                 propagating out of it, wherever it was raised?",
                w.f,
                code(w.s("type"))
            )
        }
    },
};

/// M6 `callees_across_tests`: ≥ 2 repository callees over ≥ 2 tests.
const M6: KindRecipe = KindRecipe {
    kind: K::M6,
    extractors: &["callees_across_tests"],
    draft: |s, _| {
        if s.ctx.target.repo_callees < 2 {
            return Vec::new();
        }
        let mut p = s.base();
        p.insert("within".into(), json!(s.ctx.within));
        vec![s.draft(K::M6, "callees_across_tests", p)]
    },
    after_gold: None,
    prose: |w| {
        format!(
            "For each test in which {} runs, which {} does it call directly?",
            w.f, w.callees
        )
    },
};

/// M7 `invariants_across_tests`: a (line, variable) observed in ≥ 2 tests, ≥ 3 times in all.
const M7: KindRecipe = KindRecipe {
    kind: K::M7,
    extractors: &["invariants_across_tests"],
    draft: |s, rng| {
        let cands: Vec<&(u32, String)> = s
            .observations()
            .iter()
            .filter(|(_, v)| in_tests(v) >= 2 && v.len() >= 3)
            .map(|(k, _)| k)
            .collect();
        on_line_variable(s, rng, (K::M7, "invariants_across_tests"), &cands, s.base())
    },
    after_gold: None,
    prose: |w| {
        format!(
            "Observe the local variable {} of {} right after each execution of line {} during \
             these tests. What are the invariants of these observations, over all the tests?",
            code(w.s("variable")),
            w.f,
            w.int("line")
        )
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind has its recipe ([`recipe`] is exhaustive: a kind without one does not
    /// compile) and is drafted: [`RECIPES`] holds each kind's recipe exactly once.
    #[test]
    fn every_kind_has_one_recipe_and_is_drafted() {
        for k in K::ALL {
            assert_eq!(recipe(k).kind, k, "the recipe of {k} is another kind's");
            let n = RECIPES.iter().filter(|r| r.kind == k).count();
            assert_eq!(
                n, 1,
                "{k} is in RECIPES {n} times: it would be drafted {n} times"
            );
        }
        assert_eq!(RECIPES.len(), K::ALL.len());
    }

    /// A recipe's extractors are registered, each for the recipe's kind (the row's `kinds`).
    #[test]
    fn every_recipe_names_extractors_registered_for_its_kind() {
        for r in RECIPES {
            assert!(!r.extractors.is_empty(), "{}: no extractor", r.kind);
            for name in r.extractors {
                let ex = flux_extract::find(name)
                    .unwrap_or_else(|| panic!("{}: `{name}` is no extractor", r.kind));
                assert!(
                    ex.kinds.contains(&r.kind),
                    "{}: `{name}` is registered for {:?}",
                    r.kind,
                    ex.kinds
                );
            }
        }
    }
}

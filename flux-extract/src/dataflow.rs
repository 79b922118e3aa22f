//! Data flow: S4 (`def_use_pairs`, `dead_defs`), M4 (`def_use_across_tests`), and the small
//! tokenizer [`uses_from_source`] that finds the names a source line reads when no static
//! facts are at hand.
use crate::common::{all_invocations, facts_of, in_test_order, pick_invocation, Ix, Norm};
use crate::{ExtractError, Params};
use flux_trace::facts::FunctionFacts;
use flux_trace::query::Invocation;
use flux_trace::{Kind, TraceIndex};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

const DEFINITIONS: &str = "\
Runtime def-use pairs of local variables along the executed path of invocations of `function`. \
A *definition* is, with `definitions = \"changes\"` (default), observed from the locals the \
tracer reports: a variable is defined at the def line for the arguments of the frame's first \
call, and at line L when the frame's next event after a `line` event at L reports it changed \
(an assignment that leaves the repr unchanged is not observed and the earlier definition stays \
current; `del` is not observed). With `definitions = \"ast\"` (static facts) it is an \
assignment the AST shows, SWE-Flux's definition: at every `line` event at L every name the \
static facts say line L writes (assignment and augmented-assignment targets, `for`/`with`/ \
`except ... as` targets, walrus, imports, nested `def`s) is defined at L, and the parameters are \
defined at the `def` line (its `ast` line, not a decorator's) when the invocation begins. A \
line L *uses* the names given for it by `uses` (a map from absolute line, as a string, to \
names), or if only `source` is given by `uses_from_source`, or else by the static facts: the \
names line L reads in the function's own code, and (`nested_uses`, default true) those that \
comprehensions, lambdas and closures at line L read from the function's locals; \
`comprehension_uses` and `closure_uses` (each defaulting to `nested_uses`) say so separately \
for comprehensions and generator expressions, and for lambdas and nested functions. With \
`use_count = \"load\"` each load of a name by the function's own code at line L is one use \
(`x + x`: two occurrences per execution of L), instead of one per `line` event (`\"line\"`, \
default). With `iterable_uses = \"entry\"` (static facts) the names a `for` header reads \
are used once per entry into the loop, SWE-Flux's \"the iterable expression uses \
`collection` once when the loop is entered\": a `line` event at the header that follows a line \
of the loop's body (the next iteration, or the exhausted iterator's exit) uses nothing, \
though the target is still defined there; a target that reads names (`for x.a in ...`) then \
loses those uses too. With \
`nested_frames = true`, `line` events of the function's nested code objects (`f.<locals>....`) \
that run while the invocation is active are uses too, of the names their line reads from the \
function's locals. With `scopes = \"flat\"` (a SWE-Flux parser that walks the function's AST \
by name) the names code nested at L reads or (`definitions = \"ast\"`) writes, its own locals \
included, are the function's: `[x for x in xs]` at L uses and defines `x` at L. \
Each time a `line` event at L occurs, every name it uses that has a current \
definition at line D yields one occurrence of the pair (name, D, L); uses are taken before the \
line's own definitions, so `x += 1` pairs the previous definition of x and then defines x at \
its line. Definitions reset at the start of every invocation. `variables` keeps only those \
variables.";

pub(crate) const DEF_USE_PAIRS: &str = "\
The def-use pairs (the definitions-and-uses convention) of the Nth invocation of \
`function` (`invocation`, default 1), or with `all_invocations = true` of every selected \
invocation together, with the number of occurrences of each (summed over the invocations). \
With `line_mode = \"statement\"` both lines are normalised to the first line of their \
statement (static facts), uses not with `use_lines = \"reported\"`, and pairs equal after \
that are merged. Per invocation too (1-based \
among the selected): its pairs, and its dead definitions (as `dead_defs` defines them: \
redefined, or the invocation ended, before any use). Answer: {\"observed_def_use_pairs\": \
[{\"variable\", \"def_line\", \"use_line\", \"count\"}, ...] sorted by variable, def_line, \
use_line, \"per_invocation_pairs\": [{\"invocation\", \"variable\", \"def_line\", \"use_line\", \
\"count\"}, ...], \"per_invocation_dead_defs\": [{\"invocation\", \"variable\", \"def_line\", \
\"count\"}, ...] (both sorted by invocation, then as above), \"variables\": [`variables`, or \
every variable of a pair or dead definition, sorted]}.";

pub(crate) const DEF_USE_ACROSS_TESTS: &str = "\
Every def-use pair (the definitions-and-uses convention) observed in any invocation of \
`function` inside a test, optionally only \
those of `variable`, with the tests in which it is observed (in start order), sorted by \
variable, def_line, use_line. Answer: {\"def_use_pairs\": [{\"variable\", \"def_line\", \
\"use_line\", \"tests\": [...]}, ...]}.";

pub(crate) const DEAD_DEFS: &str = "\
Definitions (`definitions = \"ast\"`, default here, or `\"changes\"`; as for the def-use pairs) \
executed in the selected invocations of `function` (all, or the Nth with `invocation`) whose \
value is never used: the variable is redefined, or the invocation ends, before any use of that \
definition. With the count of such occurrences. Answer: {\"dead_defs\": [{\"variable\", \
\"def_line\", \"count\"}, ...]} sorted by variable, def_line.";

/// The whole definition, for `flux extractors`.
pub(crate) fn definitions_doc() -> &'static str {
    DEFINITIONS
}

type Uses = HashMap<u32, Vec<String>>;

/// Where uses come from.
enum UseSource<'t> {
    Given(Uses),
    Facts {
        f: &'t FunctionFacts,
        /// Reads by comprehensions and generator expressions at a line count there.
        comprehensions: bool,
        /// Reads by lambdas and nested functions at a line count there.
        closures: bool,
        /// The scopes nested in `f` (`f.<locals>....`), to tell who reads what.
        nested: Vec<&'t FunctionFacts>,
    },
}

/// The scopes nested in `f` (`f.<locals>....`: comprehensions, lambdas, closures), from the
/// static facts of the file `first` runs in.
fn nested_scopes<'t>(ix: &Ix<'t>, first: &Invocation, f: &FunctionFacts) -> Vec<&'t FunctionFacts> {
    let prefix = format!("{}.<locals>.", f.qualname);
    ix.facts_of_invocation(first)
        .map(|(file, _)| {
            file.functions
                .iter()
                .filter(|s| s.qualname.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A comprehension's or generator expression's scope (its own frame on 3.11).
fn is_comprehension(kind: &str) -> bool {
    matches!(
        kind,
        "listcomp" | "setcomp" | "dictcomp" | "genexpr" | "comprehension"
    )
}

impl UseSource<'_> {
    fn at(&self, line: u32) -> Vec<&str> {
        match self {
            UseSource::Given(u) => u
                .get(&line)
                .map(|v| v.iter().map(String::as_str).collect())
                .unwrap_or_default(),
            UseSource::Facts {
                f,
                comprehensions,
                closures,
                nested,
            } => {
                let mut v: Vec<&str> = f.reads_at(line).iter().map(String::as_str).collect();
                for n in f.nested_reads_at(line) {
                    if v.contains(&n.as_str()) {
                        continue;
                    }
                    // Who reads it at this line: a comprehension, or a lambda / function.
                    let by = |comp: bool| {
                        nested.iter().any(|s| {
                            is_comprehension(&s.kind) == comp
                                && s.free_reads.get(&line).is_some_and(|r| r.contains(n))
                        })
                    };
                    let keep = match (comprehensions, closures) {
                        (true, true) => true,
                        (false, false) => false,
                        (true, false) => by(true),
                        (false, true) => by(false),
                    };
                    if keep {
                        v.push(n);
                    }
                }
                v
            }
        }
    }

    /// How many uses of `name` a `line` event at `line` makes: one, or with `per_load` the
    /// number of times the function's own code loads it there.
    fn weight(&self, line: u32, name: &str, per_load: bool) -> usize {
        match self {
            UseSource::Facts { f, .. } if per_load => f.read_count(line, name).max(1) as usize,
            _ => 1,
        }
    }
}

fn given_uses(p: &Params) -> Result<Option<Uses>, ExtractError> {
    if let Some(v) = p.get("uses") {
        let Value::Object(m) = v else {
            return Err(ExtractError::BadParam {
                param: "uses".into(),
                expected: "an object mapping line numbers to lists of names",
                got: v.to_string(),
            });
        };
        let mut out = Uses::new();
        for (k, names) in m {
            let line: u32 = k.parse().map_err(|_| ExtractError::BadParam {
                param: "uses".into(),
                expected: "line numbers as keys",
                got: format!("{k:?}"),
            })?;
            let list = names
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|n| n.as_str().map(String::from))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| ExtractError::BadParam {
                    param: "uses".into(),
                    expected: "a list of names for each line",
                    got: names.to_string(),
                })?;
            out.insert(line, list);
        }
        return Ok(Some(out));
    }
    if let Some(src) = p.opt_str("source")? {
        let first = p.opt_line("source_first_line")?.unwrap_or(1);
        return Ok(Some(uses_from_source(src, first).into_iter().collect()));
    }
    Ok(None)
}

/// Definitions, uses and the frames whose lines count, for one run of the analysis.
struct Analysis<'t> {
    uses: UseSource<'t>,
    /// Each load of a name is a use (`x + x` at a line: two), not each line event.
    per_load: bool,
    ast: Option<&'t FunctionFacts>,
    nested_frames: bool,
    /// With `scopes = "flat"`: the scopes nested in the function, whose names (their own
    /// locals included) are read and written as the function's at their lines.
    flat: Vec<&'t FunctionFacts>,
    variables: Option<HashSet<String>>,
    /// With `iterable_uses = "entry"`: the `for` loops of the function, (header's first and
    /// last line, body's first and last line); their header's reads are uses only when the
    /// loop is entered, not when an iteration comes back to the header.
    iterable_once: Vec<([u32; 2], [u32; 2])>,
}

impl<'t> Analysis<'t> {
    fn new(
        ix: &Ix<'t>,
        p: &Params,
        first: &Invocation,
        default_defs: &'static str,
    ) -> Result<Analysis<'t>, ExtractError> {
        let ast = match p.choice_or("definitions", &["changes", "ast"], default_defs)? {
            "ast" => Some(facts_of(ix, first, "`definitions = \"ast\"`")?),
            _ => None,
        };
        let uses = match given_uses(p)? {
            Some(u) => UseSource::Given(u),
            None => {
                let f = facts_of(ix, first, "uses from the static facts (or give `uses`)")?;
                let nested_uses = p.bool_or("nested_uses", true)?;
                UseSource::Facts {
                    f,
                    comprehensions: p.bool_or("comprehension_uses", nested_uses)?,
                    closures: p.bool_or("closure_uses", nested_uses)?,
                    nested: nested_scopes(ix, first, f),
                }
            }
        };
        let iterable_once =
            if p.choice_or("iterable_uses", &["every", "entry"], "every")? == "entry" {
                let f = facts_of(ix, first, "`iterable_uses = \"entry\"`")?;
                let file = ix.facts_of_invocation(first).map(|(file, _)| file);
                file.into_iter()
                    .flat_map(|file| file.loops_of(&f.qualname))
                    .filter(|l| l.kind == "for" || l.kind == "async_for")
                    .map(|l| ([l.line, l.header_end.max(l.line)], l.body))
                    .collect()
            } else {
                Vec::new()
            };
        let flat = if p.choice_or("scopes", &["python", "flat"], "python")? == "flat" {
            nested_scopes(ix, first, facts_of(ix, first, "`scopes = \"flat\"`")?)
        } else {
            Vec::new()
        };
        Ok(Analysis {
            flat,
            iterable_once,
            per_load: p.choice_or("use_count", &["line", "load"], "line")? == "load",
            uses,
            ast,
            nested_frames: p.bool_or("nested_frames", false)?,
            variables: p
                .opt_str_list("variables")?
                .map(|v| v.into_iter().collect()),
        })
    }

    fn tracked(&self, name: &str) -> bool {
        self.variables.as_ref().is_none_or(|v| v.contains(name))
    }

    /// The events the analysis walks for `inv`: its own events, and with `nested_frames` the
    /// `line` events of nested code running while it is active, in trace order.
    fn events(&self, ix: &Ix<'_>, inv: &Invocation) -> Vec<usize> {
        let mut evs = inv.events.to_vec();
        if self.nested_frames {
            let Some(call) = inv.first_call(ix.trace) else {
                return evs;
            };
            let prefix = format!("{}.<locals>.", call.name());
            for &a in &inv.activations {
                let Some((c, r)) = ix.span(a) else { continue };
                for i in c..=r {
                    let e = ix.event(i);
                    if e.ev == Kind::Line
                        && e.pid == call.pid
                        && e.tid == call.tid
                        && e.name().starts_with(&prefix)
                    {
                        evs.push(i);
                    }
                }
            }
            evs.sort_unstable();
            evs.dedup();
        }
        evs
    }

    /// Walk one invocation: `on_use(name, def_line, use_line)` for every use with a current
    /// definition, `on_def(name, def_line, dead)` when a definition is replaced or the
    /// invocation ends (`dead` = it was never used).
    fn walk(
        &self,
        ix: &Ix<'_>,
        inv: &Invocation,
        mut on_use: impl FnMut(&str, u32, u32),
        mut on_def: impl FnMut(&str, u32, bool),
    ) {
        // name → (def line, used since)
        let mut reaching: HashMap<String, (u32, bool)> = HashMap::new();
        let first = inv.first_call(ix.trace);
        let def_line = match self.ast {
            Some(f) => f.def_line,
            None => first.map(|e| e.line).unwrap_or(0),
        };
        let mut define = |reaching: &mut HashMap<String, (u32, bool)>, name: &str, at: u32| {
            if let Some((d, used)) = reaching.insert(name.to_string(), (at, false)) {
                on_def(name, d, !used);
            }
        };
        if let (Some(f), Some(_)) = (self.ast, first) {
            for n in &f.params {
                if self.tracked(n) {
                    define(&mut reaching, n, def_line);
                }
            }
        }
        let own_frame = inv.activations.clone();
        let mut current: Option<u32> = None;
        let mut first_call = true;
        // The frame's previous line, and whether it was a `for` header an iteration came back
        // to (with `iterable_uses = "entry"`: no uses there).
        let mut back_at_header = false;
        for i in self.events(ix, inv) {
            let e = ix.event(i);
            let nested = !own_frame.contains(&ix.owner(i));
            if self.ast.is_none() && !nested {
                // Changes reported here happened while `current` executed (the call's arguments
                // are defined at the def line).
                let at = if e.ev == Kind::Call && first_call {
                    first_call = false;
                    def_line
                } else {
                    current.unwrap_or(def_line)
                };
                for (name, _) in &e.detail().locals {
                    if self.tracked(name) {
                        define(&mut reaching, name, at);
                    }
                }
            }
            if e.ev != Kind::Line {
                continue;
            }
            if !nested && !self.iterable_once.is_empty() {
                let within = |span: [u32; 2], line: Option<u32>| {
                    line.is_some_and(|l| span[0] <= l && l <= span[1])
                };
                back_at_header = self.iterable_once.iter().any(|&(header, body)| {
                    within(header, Some(e.line))
                        && (within(body, current) || (back_at_header && within(header, current)))
                });
            }
            let names: Vec<String> = if nested {
                // A nested frame's line: the names it reads from the function's locals.
                match &self.uses {
                    UseSource::Facts { f, .. } => f.nested_reads_at(e.line).to_vec(),
                    UseSource::Given(u) => u.get(&e.line).cloned().unwrap_or_default(),
                }
            } else if back_at_header {
                // the iterable was evaluated when the loop was entered
                Vec::new()
            } else {
                let mut v: Vec<String> =
                    self.uses.at(e.line).into_iter().map(String::from).collect();
                for n in self.flat.iter().flat_map(|s| s.reads_at(e.line)) {
                    if !v.contains(n) {
                        v.push(n.clone());
                    }
                }
                v
            };
            for n in &names {
                if !self.tracked(n) {
                    continue;
                }
                let times = if nested {
                    1
                } else {
                    self.uses.weight(e.line, n, self.per_load)
                };
                if let Some((d, used)) = reaching.get_mut(n.as_str()) {
                    *used = true;
                    for _ in 0..times {
                        on_use(n, *d, e.line);
                    }
                }
            }
            if nested {
                continue;
            }
            if let Some(f) = self.ast {
                let nested = self.flat.iter().flat_map(|s| s.writes_at(e.line));
                for n in f.writes_at(e.line).iter().chain(nested) {
                    if self.tracked(n) {
                        define(&mut reaching, n, e.line);
                    }
                }
            }
            current = Some(e.line);
        }
        for (name, (d, used)) in reaching {
            on_def(&name, d, !used);
        }
    }

    /// (variable, def line, use line) → occurrences, for one invocation.
    fn pairs(&self, ix: &Ix<'_>, inv: &Invocation) -> BTreeMap<(String, u32, u32), usize> {
        let mut out = BTreeMap::new();
        self.walk(
            ix,
            inv,
            |n, d, u| *out.entry((n.to_string(), d, u)).or_insert(0) += 1,
            |_, _, _| {},
        );
        out
    }
}

pub(crate) fn def_use_pairs(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs: Vec<Invocation> = if p.bool_or("all_invocations", false)? {
        all_invocations(ix, p, function)?
    } else {
        vec![pick_invocation(ix, p, function)?.1]
    };
    let an = Analysis::new(ix, p, &invs[0], "changes")?;
    let norm = Norm::new(ix, p, &invs[0])?;
    let use_norm = use_lines(p, &norm)?;
    // Pairs are merged after normalisation: with `line_mode = "statement"` the lines of one
    // multi-line statement are one line.
    let mut merged: BTreeMap<(String, i64, i64), usize> = BTreeMap::new();
    let mut per_pairs: BTreeMap<(usize, String, i64, i64), usize> = BTreeMap::new();
    let mut per_dead: BTreeMap<(usize, String, i64), usize> = BTreeMap::new();
    for (n, inv) in invs.iter().enumerate() {
        an.walk(
            ix,
            inv,
            |v, d, u| {
                let (d, u) = (norm.apply(d), use_norm.apply(u));
                *merged.entry((v.to_string(), d, u)).or_insert(0) += 1;
                *per_pairs.entry((n + 1, v.to_string(), d, u)).or_insert(0) += 1;
            },
            |v, d, is_dead| {
                if is_dead {
                    *per_dead
                        .entry((n + 1, v.to_string(), norm.apply(d)))
                        .or_insert(0) += 1;
                }
            },
        );
    }
    let variables: BTreeSet<String> = match p.opt_str_list("variables")? {
        Some(vs) => vs.into_iter().collect(),
        None => merged
            .keys()
            .map(|k| k.0.clone())
            .chain(per_dead.keys().map(|k| k.1.clone()))
            .collect(),
    };
    let list: Vec<Value> = merged
        .into_iter()
        .map(|((v, d, u), c)| json!({"variable": v, "def_line": d, "use_line": u, "count": c}))
        .collect();
    let per_pairs: Vec<Value> = per_pairs
        .into_iter()
        .map(|((i, v, d, u), c)| {
            json!({"invocation": i, "variable": v, "def_line": d, "use_line": u, "count": c})
        })
        .collect();
    let per_dead: Vec<Value> = per_dead
        .into_iter()
        .map(|((i, v, d), c)| json!({"invocation": i, "variable": v, "def_line": d, "count": c}))
        .collect();
    Ok(json!({
        "observed_def_use_pairs": list,
        "per_invocation_pairs": per_pairs,
        "per_invocation_dead_defs": per_dead,
        "variables": variables,
    }))
}

/// How use lines are written: as `line_mode` says (default), or, with `use_lines =
/// "reported"`, on the line the read is on even where definitions are normalised to their
/// statement's first line (SWE-Flux's "a definition uses the line where the defining statement
/// begins; a use uses the line containing the read identifier").
fn use_lines<'t>(p: &Params, norm: &Norm<'t>) -> Result<Norm<'t>, ExtractError> {
    Ok(
        match p.choice_or("use_lines", &["line_mode", "reported"], "line_mode")? {
            "reported" => norm.without_statements(),
            _ => *norm,
        },
    )
}

pub(crate) fn def_use_across_tests(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let only = p.opt_str("variable")?;
    let invs = all_invocations(ix, p, function)?;
    let an = Analysis::new(ix, p, &invs[0], "changes")?;
    let norm = Norm::new(ix, p, &invs[0])?;
    let mut found: BTreeMap<(String, u32, u32), BTreeSet<String>> = BTreeMap::new();
    for inv in invs.iter().filter(|i| !i.test.is_empty()) {
        for (key, _) in an.pairs(ix, inv) {
            if only.is_none_or(|v| v == key.0) {
                found.entry(key).or_default().insert(inv.test.to_string());
            }
        }
    }
    let order = ix.test_ids();
    let list: Vec<Value> = found
        .into_iter()
        .map(|((v, d, u), tests)| {
            json!({"variable": v, "def_line": norm.apply(d), "use_line": norm.apply(u),
                   "tests": in_test_order(&order, &tests)})
        })
        .collect();
    Ok(json!({ "def_use_pairs": list }))
}

pub(crate) fn dead_defs(ix: &TraceIndex<'_>, p: &Params) -> Result<Value, ExtractError> {
    let function = p.str("function")?;
    let invs: Vec<Invocation> = if p.contains("invocation") {
        vec![pick_invocation(ix, p, function)?.1]
    } else {
        all_invocations(ix, p, function)?
    };
    let an = Analysis::new(ix, p, &invs[0], "ast")?;
    let norm = Norm::new(ix, p, &invs[0])?;
    let mut dead: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for inv in &invs {
        an.walk(
            ix,
            inv,
            |_, _, _| {},
            |n, d, is_dead| {
                if is_dead {
                    *dead.entry((n.to_string(), d)).or_insert(0) += 1;
                }
            },
        );
    }
    let list: Vec<Value> = dead
        .into_iter()
        .map(|((v, d), c)| json!({"variable": v, "def_line": norm.apply(d), "count": c}))
        .collect();
    Ok(json!({ "dead_defs": list }))
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The names each line of `src` reads, by absolute line (`first_line` is the number of the
/// first line of `src`), in order of first appearance. A heuristic per physical line, for use
/// when no AST-derived use sets are available:
/// - identifiers that are not keywords, not attributes (after `.`), not keyword arguments
///   (`name=` inside parentheses) and not inside string literals or comments;
/// - minus plain assignment targets: names before a top-level `=` that are not subscripted,
///   not inside `[...]` and not followed by `.` or `[`; augmented assignments (`x += 1`) read
///   their target; `for` targets (between `for` and ` in`), names after `as`, and whole
///   `def`/`class`/`import`/`from`/`global`/`nonlocal` lines are not uses.
///
/// Known gaps: names inside f-string braces are missed; comprehension variables (their own
/// frame in Python 3.11) and lambda parameters are reported as uses.
pub fn uses_from_source(src: &str, first_line: u32) -> BTreeMap<u32, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut in_triple: Option<&str> = None;
    for (idx, raw) in src.lines().enumerate() {
        let line_no = first_line.saturating_add(u32::try_from(idx).unwrap_or(u32::MAX));
        // Blank out strings and comments, keeping positions.
        let mut code = String::with_capacity(raw.len());
        let chars: Vec<char> = raw.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if let Some(q) = in_triple {
                if raw[char_offset(raw, i)..].starts_with(q) {
                    in_triple = None;
                    code.push_str("   ");
                    i += 3;
                } else {
                    code.push(' ');
                    i += 1;
                }
                continue;
            }
            let c = chars[i];
            let rest = &raw[char_offset(raw, i)..];
            if rest.starts_with("\"\"\"") || rest.starts_with("'''") {
                in_triple = Some(if c == '"' { "\"\"\"" } else { "'''" });
                code.push_str("\"\"\"");
                i += 3;
            } else if c == '#' {
                break;
            } else if c == '"' || c == '\'' {
                code.push('"');
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                code.push('"');
                i += 1;
            } else {
                code.push(c);
                i += 1;
            }
        }
        let names = line_uses(&code);
        if !names.is_empty() {
            out.insert(line_no, names);
        }
    }
    out
}

fn char_offset(s: &str, char_idx: usize) -> usize {
    s.char_indices()
        .nth(char_idx)
        .map(|(b, _)| b)
        .unwrap_or(s.len())
}

struct Tok {
    name: String,
    /// Enclosing bracket characters, innermost last.
    brackets: Vec<char>,
    after_dot: bool,
    /// Next non-space characters (up to two).
    next: String,
    prev_word: Option<String>,
    /// Index of the top-level assignment segment the token is in.
    segment: usize,
}

fn line_uses(code: &str) -> Vec<String> {
    let trimmed = code.trim_start();
    let first_word: String = trimmed
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if matches!(
        first_word.as_str(),
        "def" | "class" | "import" | "from" | "global" | "nonlocal"
    ) || trimmed.starts_with("async def")
    {
        return Vec::new();
    }
    let chars: Vec<char> = code.chars().collect();
    let mut toks: Vec<Tok> = Vec::new();
    let mut brackets: Vec<char> = Vec::new();
    let mut segment = 0;
    let mut prev_word: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let before = chars[..start].iter().rev().find(|c| !c.is_whitespace());
            let next: String = chars[i..]
                .iter()
                .filter(|c| !c.is_whitespace())
                .take(2)
                .collect();
            toks.push(Tok {
                name: name.clone(),
                brackets: brackets.clone(),
                after_dot: before == Some(&'.'),
                next,
                prev_word: prev_word.clone(),
                segment,
            });
            prev_word = Some(name);
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        match c {
            '(' | '[' | '{' => brackets.push(c),
            ')' | ']' | '}' => {
                brackets.pop();
            }
            '=' if brackets.is_empty() => {
                let prev = if i > 0 { chars[i - 1] } else { ' ' };
                let next = chars.get(i + 1).copied().unwrap_or(' ');
                let augmented = "=!<>+-*/%&|^@:".contains(prev);
                if !augmented && next != '=' {
                    segment += 1;
                }
            }
            _ => {}
        }
        if !c.is_whitespace() {
            prev_word = None;
        }
        i += 1;
    }
    let is_for = first_word == "for" || trimmed.starts_with("async for");
    let mut in_for_target = false;
    let mut out: Vec<String> = Vec::new();
    for t in &toks {
        if t.name == "for" && t.brackets.is_empty() && is_for {
            in_for_target = true;
            continue;
        }
        if t.name == "in" && in_for_target && t.brackets.is_empty() {
            in_for_target = false;
            continue;
        }
        if KEYWORDS.contains(&t.name.as_str()) || t.after_dot {
            continue;
        }
        if t.prev_word.as_deref() == Some("as") {
            continue;
        }
        let subscripted = t.next.starts_with('.') || t.next.starts_with('[');
        let in_subscript = t.brackets.contains(&'[');
        if in_for_target && !subscripted && !in_subscript {
            continue;
        }
        // keyword argument `name=` inside a call
        if t.brackets.last() == Some(&'(') && t.next.starts_with('=') && !t.next.starts_with("==") {
            continue;
        }
        // plain assignment target
        if t.segment < segment && !subscripted && !in_subscript {
            continue;
        }
        if !out.contains(&t.name) {
            out.push(t.name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! Statement-based coverage with "own lines" (SWE-Flux's convention in some coverage
//! questions): a statement counts as executed when a `line` event of the function's own frames
//! falls on one of its own lines, and then every one of its own lines is covered. A
//! statement's own lines are the physical lines of its span (`lineno`..`end_lineno`) that no
//! statement nested in it holds: a simple statement's whole span, a compound statement's
//! header and its `else:` / `finally:` lines, blank and comment lines between its nested
//! statements, and a `try`'s `except` headers. The `def` statement counts as executed when the
//! function was invoked: its signature lines (the `def` line up to the line before its first
//! body statement, the docstring being one) are covered.
//!
//! From the static facts: `statements` (disjoint spans, a compound statement's header only),
//! and the full spans of `if`/`elif`/`match` (branches), loops and `try` statements. A `with`
//! statement has no full span there: its own lines are its header's.
use flux_trace::facts::{FileFacts, FunctionFacts};
use std::collections::BTreeSet;

/// A compound statement: its header's first line, its full span, and spans that stay its own
/// lines though the facts list them as statements (a `try`'s `except` headers).
struct Compound {
    header: u32,
    full: [u32; 2],
    own_spans: Vec<u32>,
}

fn compounds(file: &FileFacts, f: &FunctionFacts) -> Vec<Compound> {
    let mine = |func: &str| func == f.qualname;
    let mut out = Vec::new();
    for b in file.branches.iter().filter(|b| mine(&b.func)) {
        if matches!(b.kind.as_str(), "if" | "elif" | "match") {
            out.push(Compound {
                header: b.line,
                full: [b.line, b.end_line],
                // a `match`'s `case` headers are not statements: its own lines
                own_spans: b.cases.clone(),
            });
        }
    }
    for l in file.loops.iter().filter(|l| mine(&l.func)) {
        if l.kind != "comprehension" {
            out.push(Compound {
                header: l.line,
                full: [l.line, l.end_line],
                own_spans: Vec::new(),
            });
        }
    }
    for t in file.handlers.iter().filter(|t| mine(&t.func)) {
        out.push(Compound {
            header: t.try_line,
            full: [t.try_line, t.end_line],
            own_spans: t.handlers.iter().map(|h| h.line).collect(),
        });
    }
    out
}

/// The covered lines of `f` given the lines its own frames executed (`executed`), and whether
/// it was invoked at all.
pub(crate) fn covered(
    file: &FileFacts,
    f: &FunctionFacts,
    executed: &BTreeSet<u32>,
) -> BTreeSet<u32> {
    let mut covered = BTreeSet::new();
    if executed.is_empty() {
        return covered;
    }
    // the `def` statement: its signature, up to its first body statement
    covered.extend(f.def_line..f.body_line.max(f.def_line + 1));
    let hit = |a: u32, b: u32| executed.range(a..=b).next().is_some();
    let compounds = compounds(file, f);
    // simple statements: their whole span
    for s in &f.statements {
        let owned_by_compound = compounds
            .iter()
            .any(|c| c.header == s[0] || c.own_spans.contains(&s[0]));
        if !owned_by_compound && hit(s[0], s[1]) {
            covered.extend(s[0]..=s[1]);
        }
    }
    // compound statements: their span less what nested statements hold
    for c in &compounds {
        let inner = |a: u32, b: u32| c.full[0] <= a && b <= c.full[1] && [a, b] != c.full;
        let nested: Vec<[u32; 2]> = f
            .statements
            .iter()
            .filter(|s| s[0] != c.header && !c.own_spans.contains(&s[0]) && inner(s[0], s[1]))
            .copied()
            .chain(
                compounds
                    .iter()
                    .filter(|d| d.header != c.header && inner(d.full[0], d.full[1]))
                    .map(|d| d.full),
            )
            .collect();
        let own: Vec<u32> = (c.full[0]..=c.full[1])
            .filter(|l| !nested.iter().any(|s| s[0] <= *l && *l <= s[1]))
            .collect();
        if own.iter().any(|l| executed.contains(l)) {
            covered.extend(own);
        }
    }
    // an executed line that no span holds (none known) is covered as reported
    for &l in executed {
        if !f.statements.iter().any(|s| s[0] <= l && l <= s[1]) {
            covered.insert(l);
        }
    }
    covered
}

//! Helpers shared by the extractors: selecting invocations, line normalisation, test order.
use crate::{ExtractError, Params};
use flux_trace::query::{self, Filter, Invocation};
use flux_trace::{Kind, Trace};

/// The `test` and `file` filters of the parameters.
pub(crate) fn filter(p: &Params) -> Result<Filter<'_>, ExtractError> {
    Ok(Filter {
        test: p.opt_str("test")?,
        file: p.opt_str("file")?,
    })
}

/// " in test `t`" / " under `f`" for messages.
pub(crate) fn scope(f: &Filter<'_>) -> String {
    let mut s = String::new();
    if let Some(t) = f.test {
        s.push_str(&format!(" in test `{t}`"));
    }
    if let Some(file) = f.file {
        s.push_str(&format!(" under `{file}`"));
    }
    s
}

/// Every invocation of `function` selected by the filters; an error if there is none.
pub(crate) fn all_invocations(
    t: &Trace,
    p: &Params,
    function: &str,
) -> Result<Vec<Invocation>, ExtractError> {
    let f = filter(p)?;
    let invs = query::invocations(t, function, f);
    if invs.is_empty() {
        return Err(ExtractError::NoInvocation {
            function: function.to_string(),
            count: 0,
            asked: 1,
            scope: scope(&f),
        });
    }
    Ok(invs)
}

/// The invocation chosen by `invocation` (default 1) among those selected by the filters.
pub(crate) fn pick_invocation(
    t: &Trace,
    p: &Params,
    function: &str,
) -> Result<(usize, Invocation), ExtractError> {
    let f = filter(p)?;
    let n = p.index_or("invocation", 1)?;
    let mut invs = query::invocations(t, function, f);
    if n > invs.len() {
        return Err(ExtractError::NoInvocation {
            function: function.to_string(),
            count: invs.len(),
            asked: n,
            scope: scope(&f),
        });
    }
    Ok((n, invs.swap_remove(n - 1)))
}

/// How answer line numbers are written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Norm {
    /// `Some(def_line)` for relative numbering.
    def_line: Option<u32>,
}

impl Norm {
    /// From `normalize` / `def_line`; `first` supplies the default def line (its first call).
    pub(crate) fn new(t: &Trace, p: &Params, first: &Invocation) -> Result<Norm, ExtractError> {
        match p.opt_str("normalize")?.unwrap_or("absolute") {
            "absolute" => Ok(Norm { def_line: None }),
            "relative" => {
                let def = match p.opt_line("def_line")? {
                    Some(d) => d,
                    None => first.first_call(t).map(|e| e.line).unwrap_or(0),
                };
                if def == 0 {
                    return Err(ExtractError::NotObserved(
                        "relative line numbers need the def line, and the first call event has \
                         no line; give `def_line`"
                            .into(),
                    ));
                }
                Ok(Norm {
                    def_line: Some(def),
                })
            }
            other => Err(ExtractError::BadParam {
                param: "normalize".into(),
                expected: "\"absolute\" or \"relative\"",
                got: format!("{other:?}"),
            }),
        }
    }

    pub(crate) fn apply(self, line: u32) -> i64 {
        match self.def_line {
            None => i64::from(line),
            Some(d) => i64::from(line) - i64::from(d) + 1,
        }
    }
}

/// Positions (in `inv.events`) of the frame's `line` events at `line`.
pub(crate) fn line_positions(t: &Trace, inv: &Invocation, line: u32) -> Vec<usize> {
    inv.events
        .iter()
        .enumerate()
        .filter(|(_, &i)| t.events[i].ev == Kind::Line && t.events[i].line == line)
        .map(|(k, _)| k)
        .collect()
}

/// Test ids in start order.
pub(crate) fn test_ids(t: &Trace) -> Vec<String> {
    query::tests(t).into_iter().map(|r| r.id).collect()
}

/// Sort `items` (test ids) into the order of `order`, dropping duplicates.
pub(crate) fn in_test_order(
    order: &[String],
    items: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    order
        .iter()
        .filter(|t| items.contains(*t))
        .cloned()
        .collect()
}

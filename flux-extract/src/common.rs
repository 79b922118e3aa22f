//! Helpers shared by the extractors: selecting invocations, locations, line normalisation,
//! test order.
use crate::{ExtractError, Params};
use flux_trace::facts::FunctionFacts;
use flux_trace::query::{Filter, Invocation};
use flux_trace::{Event, Kind, TraceIndex};
use serde_json::{json, Value};
use std::collections::HashSet;

pub(crate) type Ix<'t> = TraceIndex<'t>;

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

/// Numbers of the invocations of `function` selected by the filters (possibly none). A name
/// whose invocations come from several files is [`ExtractError::Ambiguous`] unless `file` is
/// given.
fn selected(ix: &Ix<'_>, p: &Params, function: &str) -> Result<Vec<usize>, ExtractError> {
    let f = filter(p)?;
    if f.file.is_none() {
        let files = ix.files_of(function);
        if files.len() > 1 {
            return Err(ExtractError::Ambiguous {
                function: function.to_string(),
                files: files.into_iter().map(String::from).collect(),
            });
        }
    }
    Ok(ix.invocation_ids_passing(function, f))
}

/// The invocations of `function` selected by the filters (possibly none; see [`selected`]).
pub(crate) fn invocations(
    ix: &Ix<'_>,
    p: &Params,
    function: &str,
) -> Result<Vec<Invocation>, ExtractError> {
    Ok(selected(ix, p, function)?
        .into_iter()
        .filter_map(|k| ix.invocation(k))
        .collect())
}

/// Every invocation of `function` selected by the filters; an error if there is none.
pub(crate) fn all_invocations(
    ix: &Ix<'_>,
    p: &Params,
    function: &str,
) -> Result<Vec<Invocation>, ExtractError> {
    let invs = invocations(ix, p, function)?;
    if invs.is_empty() {
        return Err(ExtractError::NoInvocation {
            function: function.to_string(),
            count: 0,
            asked: 1,
            scope: scope(&filter(p)?),
        });
    }
    Ok(invs)
}

/// The invocation chosen by `invocation` (default 1) among those selected by the filters.
pub(crate) fn pick_invocation(
    ix: &Ix<'_>,
    p: &Params,
    function: &str,
) -> Result<(usize, Invocation), ExtractError> {
    let n = p.index_or("invocation", 1)?;
    // Only the chosen one is made.
    let ids = selected(ix, p, function)?;
    let count = ids.len();
    if let Some(inv) = n
        .checked_sub(1)
        .and_then(|i| ids.get(i))
        .and_then(|&k| ix.invocation(k))
    {
        return Ok((n, inv));
    }
    Err(ExtractError::NoInvocation {
        function: function.to_string(),
        count,
        asked: n,
        scope: scope(&filter(p)?),
    })
}

/// The static facts of an invocation's code, or an error saying what needs them.
pub(crate) fn facts_of<'t>(
    ix: &Ix<'t>,
    inv: &Invocation,
    what: &str,
) -> Result<&'t FunctionFacts, ExtractError> {
    ix.facts_of_invocation(inv).map(|(_, f)| f).ok_or_else(|| {
        let call = inv.first_call(ix.trace);
        ExtractError::NotObserved(format!(
            "{what} needs the static facts of `{}` ({}), and the trace has none for it (they \
             come from the hook for targeted files)",
            call.map(|e| e.name()).unwrap_or("?"),
            call.map(|e| e.file().as_str()).unwrap_or("?"),
        ))
    })
}

/// How answer line numbers are written: optionally normalised to their statement's first
/// line (`line_mode = "statement"`), then absolute or relative to the def line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Norm<'t> {
    /// `Some(def_line)` for relative numbering.
    def_line: Option<u32>,
    statements: Option<&'t FunctionFacts>,
}

pub(crate) const LINES_CHOICES: &[&str] = &["reported", "statement"];

impl<'t> Norm<'t> {
    /// The same numbering with lines as reported (no statement normalisation).
    pub(crate) fn without_statements(&self) -> Norm<'t> {
        Norm {
            def_line: self.def_line,
            statements: None,
        }
    }

    /// From `normalize` / `def_line` / `lines`; `first` supplies the default def line (its first
    /// call) and the facts for statement normalisation.
    pub(crate) fn new(
        ix: &Ix<'t>,
        p: &Params,
        first: &Invocation,
    ) -> Result<Norm<'t>, ExtractError> {
        let statements = match p.choice_or("line_mode", LINES_CHOICES, "reported")? {
            "statement" => Some(facts_of(ix, first, "`line_mode = \"statement\"`")?),
            _ => None,
        };
        let def_line = match p.opt_str("normalize")?.unwrap_or("absolute") {
            "absolute" => None,
            "relative" => {
                let def = match p.opt_line("def_line")? {
                    Some(d) => d,
                    None => first.first_call(ix.trace).map(|e| e.line).unwrap_or(0),
                };
                if def == 0 {
                    return Err(ExtractError::NotObserved(
                        "relative line numbers need the def line, and the first call event has \
                         no line; give `def_line`"
                            .into(),
                    ));
                }
                Some(def)
            }
            other => {
                return Err(ExtractError::BadParam {
                    param: "normalize".into(),
                    expected: "\"absolute\" or \"relative\"",
                    got: format!("{other:?}"),
                })
            }
        };
        Ok(Norm {
            def_line,
            statements,
        })
    }

    /// The line as the answer writes it.
    pub(crate) fn apply(self, line: u32) -> i64 {
        self.relative(self.statement(line))
    }

    /// Absolute or relative numbering of a line already normalised.
    pub(crate) fn relative(self, line: u32) -> i64 {
        match self.def_line {
            None => i64::from(line),
            Some(d) => i64::from(line) - i64::from(d) + 1,
        }
    }

    /// The line normalised to its statement (unchanged with `lines = "reported"`).
    pub(crate) fn statement(self, line: u32) -> u32 {
        match self.statements {
            Some(f) => f.statement_start(line),
            None => line,
        }
    }
}

/// Positions (in `inv.events`) of the frame's `line` events at `line`.
pub(crate) fn line_positions(ix: &Ix<'_>, inv: &Invocation, line: u32) -> Vec<usize> {
    inv.events
        .iter()
        .enumerate()
        .filter(|(_, &i)| ix.trace.events[i].ev == Kind::Line && ix.trace.events[i].line == line)
        .map(|(k, _)| k)
        .collect()
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

/// The dotted module name of a source file: the path after the last `site-packages/` or
/// `dist-packages/`, else after `lib/pythonX.Y/`, else from the component where `within`
/// matches, else the file's stem; `.py` and `/__init__` dropped, `/` as `.`.
pub(crate) fn module_of(file: &str, within: Option<&str>) -> String {
    if let Some(m) = java_package(file) {
        return m;
    }
    let markers = ["/site-packages/", "/dist-packages/"];
    let stdlib = file.rfind("/lib/python").and_then(|i| {
        let after = &file[i + "/lib/python".len()..];
        after.find('/').map(|j| i + "/lib/python".len() + j + 1)
    });
    let rest = if let Some((i, m)) = markers
        .iter()
        .filter_map(|m| file.rfind(m).map(|i| (i, m.len())))
        .max()
    {
        &file[i + m..]
    } else if let Some(start) = stdlib {
        &file[start..]
    } else if let Some(w) = within
        .map(|w| w.trim_matches('/'))
        .filter(|w| !w.is_empty())
    {
        match file.find(&format!("/{w}")) {
            Some(i) => &file[i + 1..],
            None => file,
        }
    } else {
        let mut parts = file.rsplit('/');
        match (parts.next(), parts.next()) {
            (Some("__init__.py"), Some(pkg)) => pkg,
            (Some(name), _) => name,
            _ => file,
        }
    };
    let rest = rest.trim_start_matches('/');
    let rest = rest.strip_suffix(".py").unwrap_or(rest);
    let rest = rest.strip_suffix("/__init__").unwrap_or(rest);
    rest.replace('/', ".")
}

/// The module of a JVM method's file as `flux_merge::jvm` names it (`org/example/Main.java`,
/// relative to its source root): its package (`org.example`), since the event's qualname
/// already holds the class (`Main.Inner.run`). None for any other file.
fn java_package(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".java")?;
    Some(
        stem.rsplit_once('/')
            .map_or(String::new(), |(pkg, _)| pkg.replace('/', ".")),
    )
}

/// The module of a file for answers: with `root`, from the path relative to it (`src/` layouts
/// are handled by `module_root`), else [`module_of`].
fn module_for(file: &str, root: Option<&str>, module_root: Option<&str>) -> String {
    if let Some(m) = java_package(file) {
        return m;
    }
    let base = module_root.or(root);
    if let Some(r) = base {
        let r = r.trim_end_matches('/');
        if let Some(rest) = file.strip_prefix(r).and_then(|x| x.strip_prefix('/')) {
            let rest = rest.strip_suffix(".py").unwrap_or(rest);
            let rest = rest.strip_suffix("/__init__").unwrap_or(rest);
            return rest.replace('/', ".");
        }
    }
    module_of(file, None)
}

/// The path written as `file` in answers (see the crate doc).
pub(crate) fn relative_file(file: &str, root: Option<&str>) -> String {
    if let Some(r) = root {
        let r = r.trim_end_matches('/');
        if let Some(rest) = file.strip_prefix(r).and_then(|x| x.strip_prefix('/')) {
            return rest.to_string();
        }
    }
    for m in ["/site-packages/", "/dist-packages/"] {
        if let Some(i) = file.rfind(m) {
            return file[i + m.len()..].to_string();
        }
    }
    file.to_string()
}

/// Writes locations (file, function identity, line) the way the parameters ask.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Loc<'p> {
    root: Option<&'p str>,
    module_root: Option<&'p str>,
    /// Modules named as the code's globals name them (`__name__`, which the hook records in
    /// dialect `swe-flux`), where the event says; else from the path.
    runtime_modules: bool,
    /// A listed function may be named `module.co_name` (a tracer on Python before 3.11).
    co_names: bool,
}

impl<'p> Loc<'p> {
    pub(crate) fn new(p: &'p Params) -> Result<Loc<'p>, ExtractError> {
        Ok(Loc {
            root: p.opt_str("root")?,
            module_root: p.opt_str("module_root")?,
            runtime_modules: p.choice_or("module_names", &["path", "runtime"], "path")?
                == "runtime",
            co_names: p.choice_or("function_names", &["qualname", "co_name"], "qualname")?
                == "co_name",
        })
    }

    /// The module of the code `e` belongs to, as [`Loc::record`] writes it.
    pub(crate) fn module_of_event(self, e: &Event) -> String {
        if self.runtime_modules && !e.module().is_empty() {
            e.module().to_string()
        } else {
            self.module(e.file())
        }
    }

    pub(crate) fn file(self, file: &str) -> String {
        relative_file(file, self.root)
    }

    pub(crate) fn module(self, file: &str) -> String {
        module_for(file, self.root, self.module_root)
    }

    /// `module.qualname` of the code that `e` belongs to.
    pub(crate) fn func(self, e: &Event) -> String {
        self.dotted(e, e.name())
    }

    fn dotted(self, e: &Event, name: &str) -> String {
        let m = self.module_of_event(e);
        if m.is_empty() {
            name.to_string()
        } else {
            format!("{m}.{name}")
        }
    }

    /// [`Loc::func`], or with `function_names = "co_name"` `module.co_name` (no list to follow:
    /// as a tracer before Python 3.11 names every frame).
    pub(crate) fn func_by_name_mode(self, e: &Event) -> String {
        if self.co_names {
            self.co_name_func(e)
        } else {
            self.func(e)
        }
    }

    /// `module.co_name` of the code that `e` belongs to (its qualname's last part).
    fn co_name_func(self, e: &Event) -> String {
        let name = e.name();
        self.dotted(e, name.rsplit('.').next().unwrap_or(name))
    }

    /// [`Loc::func`], or with `function_names = "co_name"` the `module.co_name` that `listed`
    /// names when it names the code only so: answers write a function as the question lists
    /// it, by its class or (a run before 3.11) by its `co_name`.
    pub(crate) fn func_as_listed(self, e: &Event, listed: Option<&HashSet<String>>) -> String {
        let q = self.func(e);
        match listed {
            Some(l) if self.co_names && !l.contains(&q) && !l.contains(e.name()) => {
                let c = self.co_name_func(e);
                if l.contains(&c) {
                    c
                } else {
                    q
                }
            }
            _ => q,
        }
    }

    /// `{file, abs_file, module, qualname, func, function}` of the code `e` belongs to, plus
    /// `line` when given.
    pub(crate) fn record(self, e: &Event, line: Option<i64>) -> Value {
        let mut v = json!({
            "file": self.file(e.file()),
            "abs_file": e.file(),
            "module": self.module_of_event(e),
            "qualname": e.name(),
            "function": e.name(),
            "func": self.func(e),
        });
        if let Some(l) = line {
            v["line"] = json!(l);
        }
        v
    }
}

/// The shape text of the fields [`Loc::record`] writes (for the extractors' shapes).
#[macro_export]
#[doc(hidden)]
macro_rules! loc_fields {
    () => {
        r#""file": "str", "abs_file": "str", "module": "str", "qualname": "str", "function": "str", "func": "str""#
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JVM event's module was taken from its file's stem (`Worker.java.Worker.run`).
    #[test]
    fn java_methods_are_named_by_package_and_class() {
        assert_eq!(module_of("fluxfixture/Worker.java", None), "fluxfixture");
        assert_eq!(
            module_for("org/apache/commons/lang3/StringUtils.java", None, None),
            "org.apache.commons.lang3"
        );
        assert_eq!(module_of("Top.java", Some("x/")), "");
    }

    #[test]
    fn module_and_file_names() {
        assert_eq!(
            module_of(
                "/usr/lib/python3.11/site-packages/sympy/core/__init__.py",
                None
            ),
            "sympy.core"
        );
        assert_eq!(
            module_of("/work/src/attr/_make.py", Some("attr/")),
            "attr._make"
        );
        assert_eq!(module_of("/tmp/test_x.py", None), "test_x");
        assert_eq!(
            module_of("/usr/lib/python3.11/re/_parser.py", None),
            "re._parser"
        );
        assert_eq!(
            relative_file("/usr/lib/python3/dist-packages/flask/ctx.py", None),
            "flask/ctx.py"
        );
        assert_eq!(
            relative_file("/testbed/src/flask/ctx.py", Some("/testbed/")),
            "src/flask/ctx.py"
        );
        assert_eq!(relative_file("/x/y.py", Some("/other")), "/x/y.py");
        assert_eq!(
            module_for(
                "/testbed/src/flask/ctx.py",
                Some("/testbed"),
                Some("/testbed/src")
            ),
            "flask.ctx"
        );
    }
}

//! Static facts of the source files a trace ran: what `flux_hook.static_facts` computes from
//! Python's AST (its module doc is the format's reference), typed.
//!
//! Why in the trace: extractors are pure functions of the trace, yet several definitions
//! SWE-Flux uses come from the source (a line normalised to the statement that holds it, a
//! definition as an assignment the AST shows, the functions of a class that never ran, the
//! types an `except` names). The hook computes these facts in the traced process for every
//! targeted file, on the exact file that ran and with the interpreter that ran it, and the merge
//! copies them into [`crate::Trace::facts`]; so an answer still depends on the trace alone.
//!
//! Conventions: lines are 1-based physical lines; `[a, b]` spans are inclusive; a qualname is
//! CPython's `co_qualname` for the interpreter named by [`FileFacts::python`].
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `{line: [names]}` as the AST shows them, in first-seen order per line.
pub type LineNames = BTreeMap<u32, Vec<String>>;

/// The facts of one source file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileFacts {
    /// The path as the interpreter saw it (`co_filename`), the key in [`crate::Trace::facts`].
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub sha256: String,
    /// `MAJOR.MINOR` of the interpreter that computed them.
    #[serde(default)]
    pub python: String,
    #[serde(default)]
    pub lines: u32,
    /// One entry per scope, module first, in source order.
    #[serde(default)]
    pub functions: Vec<FunctionFacts>,
    #[serde(default)]
    pub loops: Vec<LoopFacts>,
    #[serde(default)]
    pub branches: Vec<BranchFacts>,
    #[serde(default)]
    pub handlers: Vec<TryFacts>,
}

/// One scope (module, class body, function, lambda, comprehension, or a code object the
/// compiler adds beside a definition).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionFacts {
    pub qualname: String,
    #[serde(default)]
    pub name: String,
    /// `module`, `class`, `function`, `async_function`, `lambda`, `listcomp`, `setcomp`,
    /// `dictcomp`, `genexpr`, `type_params`, `type_param`, `type_value`, `annotate`.
    #[serde(default)]
    pub kind: String,
    /// It runs as a code object of its own (false for inlined comprehensions, 3.12+).
    #[serde(default)]
    pub code: bool,
    pub def_line: u32,
    /// `co_firstlineno`: the first decorator's line for a decorated definition.
    pub first_line: u32,
    #[serde(default)]
    pub body_line: u32,
    pub last_line: u32,
    #[serde(default)]
    pub decorators: Vec<String>,
    #[serde(default)]
    pub params: Vec<String>,
    #[serde(default)]
    pub parent: Option<String>,
    /// Disjoint header/statement spans, sorted (see [`FunctionFacts::statement_start`]).
    #[serde(default)]
    pub statements: Vec<[u32; 2]>,
    #[serde(default)]
    pub writes: LineNames,
    #[serde(default)]
    pub deletes: LineNames,
    #[serde(default)]
    pub reads: LineNames,
    #[serde(default)]
    pub free_reads: LineNames,
    #[serde(default)]
    pub nested_reads: LineNames,
    /// How many times a name of [`FunctionFacts::reads`] is loaded at a line, where more than
    /// once (`x + x`); absent: once.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_counts: BTreeMap<u32, BTreeMap<String, u32>>,
    #[serde(default)]
    pub calls: LineNames,
    #[serde(default)]
    pub globals: Vec<String>,
    #[serde(default)]
    pub nonlocals: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopFacts {
    /// Qualname of the scope the loop runs in.
    pub func: String,
    /// `for`, `while`, `async_for` or `comprehension`.
    pub kind: String,
    /// The header line.
    pub line: u32,
    #[serde(default)]
    pub header_end: u32,
    pub end_line: u32,
    /// First and last line of the body (the `else:` clause excluded).
    pub body: [u32; 2],
    pub body_first_line: u32,
    #[serde(default, rename = "else")]
    pub else_: Option<[u32; 2]>,
    /// Enclosing loops of the same scope.
    #[serde(default)]
    pub depth: u32,
    /// Header line of the innermost enclosing loop of the same scope.
    #[serde(default)]
    pub parent: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BranchFacts {
    pub func: String,
    /// `if`, `elif`, `ifexp`, `and`, `or`, `match`, `comp_if`.
    pub kind: String,
    pub line: u32,
    #[serde(default)]
    pub end_line: u32,
    #[serde(default)]
    pub test_end: Option<u32>,
    /// First line of the taken-when-true body (`if`/`elif`/`ifexp`).
    #[serde(default)]
    pub body_line: Option<u32>,
    /// First line of the `else`/`elif` part, if any.
    #[serde(default)]
    pub else_line: Option<u32>,
    #[serde(default)]
    pub operands: Option<u32>,
    /// `match`: the line of each `case`.
    #[serde(default)]
    pub cases: Vec<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TryFacts {
    pub func: String,
    pub try_line: u32,
    pub end_line: u32,
    #[serde(default)]
    pub body: Option<[u32; 2]>,
    #[serde(default)]
    pub handlers: Vec<HandlerFacts>,
    #[serde(default, rename = "else")]
    pub else_: Option<[u32; 2]>,
    #[serde(default)]
    pub finally: Option<[u32; 2]>,
    #[serde(default)]
    pub star: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandlerFacts {
    /// The `except` line.
    pub line: u32,
    /// Source text of each type it names (`[]` for a bare `except:`).
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub body: Option<[u32; 2]>,
}

impl FunctionFacts {
    /// The first line of the statement (or compound-statement header) that holds `line`, or
    /// `line` itself when no span of this scope holds it (a blank line, `else:`).
    pub fn statement_start(&self, line: u32) -> u32 {
        let i = self.statements.partition_point(|s| s[1] < line);
        match self.statements.get(i) {
            Some(s) if s[0] <= line => s[0],
            _ => line,
        }
    }

    /// Does this scope's code hold `line` (between its first and last line)?
    pub fn holds_line(&self, line: u32) -> bool {
        self.first_line <= line && line <= self.last_line
    }

    /// Names written at `line` (parameters at the def line, assignment targets, ...).
    pub fn writes_at(&self, line: u32) -> &[String] {
        self.writes.get(&line).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Names this scope's own code reads at `line` and resolves locally.
    pub fn reads_at(&self, line: u32) -> &[String] {
        self.reads.get(&line).map(Vec::as_slice).unwrap_or(&[])
    }

    /// How many times this scope's own code loads `name` at `line` (1 when
    /// [`FunctionFacts::reads`] has it and no count says more; 0 when it does not read it).
    pub fn read_count(&self, line: u32, name: &str) -> u32 {
        if let Some(n) = self.read_counts.get(&line).and_then(|m| m.get(name)) {
            return *n;
        }
        u32::from(self.reads_at(line).iter().any(|x| x == name))
    }

    /// Names nested scopes read at `line` that resolve to this scope's locals.
    pub fn nested_reads_at(&self, line: u32) -> &[String] {
        self.nested_reads
            .get(&line)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

impl FileFacts {
    /// The scopes named `qualname` (several when a name is defined more than once).
    pub fn functions_named<'a>(
        &'a self,
        qualname: &'a str,
    ) -> impl Iterator<Item = &'a FunctionFacts> {
        self.functions
            .iter()
            .filter(move |f| f.qualname == qualname)
    }

    /// The scope named `qualname` whose code holds `line` (the innermost such definition), or
    /// the only one of that name when `line` is 0.
    pub fn function_at<'a>(&'a self, qualname: &'a str, line: u32) -> Option<&'a FunctionFacts> {
        let mut found: Vec<&FunctionFacts> = self.functions_named(qualname).collect();
        if line == 0 {
            return if found.len() == 1 { found.pop() } else { None };
        }
        found.retain(|f| f.holds_line(line));
        found.into_iter().min_by_key(|f| f.last_line - f.first_line)
    }

    /// The scope whose `co_firstlineno` is `first_line` and qualname `qualname`: how a frame's
    /// code object (qualname, first line from its call event) is matched to its facts.
    pub fn function_by_code<'a>(
        &'a self,
        qualname: &'a str,
        first_line: u32,
    ) -> Option<&'a FunctionFacts> {
        self.functions_named(qualname)
            .find(|f| f.first_line == first_line)
            .or_else(|| self.function_at(qualname, first_line))
    }

    /// The loop of `func` whose header is at `line`.
    pub fn loop_at<'a>(&'a self, func: &'a str, line: u32) -> Option<&'a LoopFacts> {
        self.loops.iter().find(|l| l.func == func && l.line == line)
    }

    /// The loops of `func`, in source order.
    pub fn loops_of<'a>(&'a self, func: &'a str) -> impl Iterator<Item = &'a LoopFacts> {
        self.loops.iter().filter(move |l| l.func == func)
    }

    /// The `try` statements of `func`.
    pub fn handlers_of<'a>(&'a self, func: &'a str) -> impl Iterator<Item = &'a TryFacts> {
        self.handlers.iter().filter(move |h| h.func == func)
    }

    /// The `except` clause at `line` of `func`.
    pub fn handler_at<'a>(&'a self, func: &'a str, line: u32) -> Option<&'a HandlerFacts> {
        self.handlers_of(func)
            .flat_map(|t| t.handlers.iter())
            .find(|h| h.line == line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON `flux_hook.static_facts` prints for
    /// `def f(a):\n    x = (a +\n         1)\n    for i in range(x):\n        pass\n`.
    const SAMPLE: &str = r#"{"file":"/t/m.py","sha256":"00","python":"3.11","lines":5,
      "functions":[
        {"qualname":"<module>","name":"<module>","kind":"module","code":true,"def_line":1,
         "first_line":1,"body_line":1,"last_line":5,"decorators":[],"params":[],"parent":null,
         "statements":[[1,1]],"writes":{"1":["f"]},"deletes":{},"reads":{},"free_reads":{},
         "nested_reads":{},"calls":{},"globals":[],"nonlocals":[]},
        {"qualname":"f","name":"f","kind":"function","code":true,"def_line":1,"first_line":1,
         "body_line":2,"last_line":5,"decorators":[],"params":["a"],"parent":"<module>",
         "statements":[[2,3],[4,4],[5,5]],"writes":{"1":["a"],"2":["x"],"4":["i"]},
         "deletes":{},"reads":{"2":["a"],"4":["x"]},"free_reads":{"4":["range"]},
         "nested_reads":{},"calls":{"4":["range"]},"globals":[],"nonlocals":[]}],
      "loops":[{"func":"f","kind":"for","line":4,"header_end":4,"end_line":5,"body":[5,5],
                "body_first_line":5,"else":null,"depth":0,"parent":null}],
      "branches":[],
      "handlers":[{"func":"f","try_line":9,"end_line":12,"body":[10,10],
        "handlers":[{"line":11,"types":["ValueError","KeyError"],"name":"e","body":[12,12]}],
        "else":null,"finally":null,"star":false}]}"#;

    #[test]
    fn the_hooks_json_reads_into_typed_facts() {
        let f: FileFacts = serde_json::from_str(SAMPLE).unwrap();
        let func = f.function_at("f", 3).unwrap();
        assert_eq!(func.params, vec!["a"]);
        assert_eq!(func.writes_at(2), ["x"]);
        assert_eq!(func.reads_at(4), ["x"]);
        assert!(func.writes_at(3).is_empty());
        // Line 3 continues the statement of line 2; 4 and 5 start their own; 6 is in none.
        assert_eq!(
            [2, 3, 4, 5, 6].map(|l| func.statement_start(l)),
            [2, 2, 4, 5, 6]
        );
        assert_eq!(f.loop_at("f", 4).unwrap().body_first_line, 5);
        assert!(f.loop_at("f", 5).is_none());
        assert_eq!(
            f.handler_at("f", 11).unwrap().types,
            vec!["ValueError", "KeyError"]
        );
        assert_eq!(f.function_by_code("f", 1).unwrap().qualname, "f");
        assert!(f.function_at("g", 0).is_none());
        let back: FileFacts = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }
}

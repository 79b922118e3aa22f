//! Static facts of the repository's source files, computed by the image's own interpreter
//! (`python3 -m flux_hook.static_facts FILE...` in a container of the image: the AST of the
//! exact files the tests run, parsed by the Python that runs them). This module reads the
//! part of that JSON the planner uses (functions with their spans, loops, branches, handlers,
//! writes and reads per line) and tolerates fields it does not know.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `{"version", "python", "files": {PATH: FileFacts}, "errors": {PATH: MESSAGE}}`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct FactsDoc {
    #[serde(default)]
    pub files: BTreeMap<String, FileFacts>,
    #[serde(default)]
    pub errors: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct FileFacts {
    #[serde(default)]
    pub sha256: String,
    #[serde(default)]
    pub lines: u32,
    #[serde(default)]
    pub functions: Vec<FunctionFacts>,
    #[serde(default)]
    pub loops: Vec<LoopFacts>,
    #[serde(default)]
    pub branches: Vec<BranchFacts>,
    #[serde(default)]
    pub handlers: Vec<HandlerFacts>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct FunctionFacts {
    pub qualname: String,
    pub name: String,
    pub kind: String,
    /// Runs as a frame of its own on this interpreter.
    #[serde(default = "yes")]
    pub code: bool,
    pub def_line: u32,
    /// `co_firstlineno` (the first decorator's line for a decorated def).
    pub first_line: u32,
    #[serde(default)]
    pub body_line: u32,
    pub last_line: u32,
    #[serde(default)]
    pub params: Vec<String>,
    #[serde(default)]
    pub parent: Option<String>,
    /// `[start, end]` of each statement of this scope (compound statements: their header).
    #[serde(default)]
    pub statements: Vec<[u32; 2]>,
    /// Line (as a string) → names bound there in this scope.
    #[serde(default)]
    pub writes: BTreeMap<String, Vec<String>>,
    /// Line → locals of this scope read there by its own code.
    #[serde(default)]
    pub reads: BTreeMap<String, Vec<String>>,
    /// Line → locals of this scope read there by nested scopes (comprehensions, closures).
    #[serde(default)]
    pub nested_reads: BTreeMap<String, Vec<String>>,
    /// Line → callee expressions of the calls made there.
    #[serde(default)]
    pub calls: BTreeMap<String, Vec<String>>,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct LoopFacts {
    pub func: String,
    pub kind: String,
    pub line: u32,
    #[serde(default)]
    pub header_end: u32,
    pub end_line: u32,
    /// `[first, last]` line of the body (without any `else:`).
    pub body: Option<[u32; 2]>,
    #[serde(default)]
    pub body_first_line: u32,
    #[serde(default)]
    pub depth: u32,
    #[serde(default)]
    pub parent: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct BranchFacts {
    pub func: String,
    pub kind: String,
    pub line: u32,
    #[serde(default)]
    pub end_line: u32,
    #[serde(default)]
    pub body_line: Option<u32>,
    #[serde(default)]
    pub else_line: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HandlerFacts {
    pub func: String,
    pub try_line: u32,
    #[serde(default)]
    pub end_line: u32,
    #[serde(default)]
    pub handlers: Vec<ExceptFacts>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ExceptFacts {
    pub line: u32,
    #[serde(default)]
    pub types: Vec<String>,
}

impl FileFacts {
    /// The function whose code object starts at `first_line` with name `name` (what a call
    /// event reports), if the file has it.
    pub fn function_at(&self, name: &str, first_line: u32) -> Option<&FunctionFacts> {
        self.functions
            .iter()
            .find(|f| f.code && f.name == name && f.first_line == first_line)
            .or_else(|| {
                // A decorated function: USDT/the hook report co_firstlineno, the decorator's
                // line, which `first_line` already is; some interpreters report the def line.
                self.functions
                    .iter()
                    .find(|f| f.code && f.name == name && f.def_line == first_line)
            })
    }

    pub fn function(&self, qualname: &str) -> Option<&FunctionFacts> {
        self.functions.iter().find(|f| f.qualname == qualname)
    }

    pub fn loops_of<'a>(&'a self, qualname: &'a str) -> impl Iterator<Item = &'a LoopFacts> {
        self.loops.iter().filter(move |l| l.func == qualname)
    }

    pub fn branches_of<'a>(&'a self, qualname: &'a str) -> impl Iterator<Item = &'a BranchFacts> {
        self.branches.iter().filter(move |b| b.func == qualname)
    }

    pub fn handlers_of<'a>(&'a self, qualname: &'a str) -> impl Iterator<Item = &'a HandlerFacts> {
        self.handlers.iter().filter(move |h| h.func == qualname)
    }
}

impl FunctionFacts {
    /// Source lines it spans, first line to last.
    pub fn span(&self) -> u32 {
        self.last_line.saturating_sub(self.first_line) + 1
    }

    /// Is it a plain function or method (not a lambda, comprehension, class body or module)?
    pub fn is_function(&self) -> bool {
        matches!(self.kind.as_str(), "function" | "async_function")
    }

    /// The class it is a method of (`A.B.m` → `A.B`), if any.
    pub fn class(&self) -> Option<&str> {
        let (owner, _) = self.qualname.rsplit_once('.')?;
        (!owner.contains("<locals>")).then_some(owner)
    }

    /// Names it binds, by line (parameters at the def line included).
    pub fn writes_at(&self, line: u32) -> &[String] {
        self.writes
            .get(&line.to_string())
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// `uses` for the def-use extractors: line → locals read there, by its own code and by
    /// nested scopes (SWE-Flux attributes reads in comprehensions to the enclosing function).
    pub fn uses(&self) -> BTreeMap<u32, Vec<String>> {
        let mut out: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for m in [&self.reads, &self.nested_reads] {
            for (l, names) in m {
                let Ok(l) = l.parse::<u32>() else { continue };
                let e = out.entry(l).or_default();
                for n in names {
                    if !e.contains(n) {
                        e.push(n.clone());
                    }
                }
            }
        }
        out
    }

    /// Statements of its own (not of nested functions).
    pub fn statement_count(&self) -> usize {
        self.statements.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const DOC: &str = r#"{"version":1,"python":"3.11","files":{"/r/pkg/m.py":{"file":"/r/pkg/m.py","sha256":"ab","python":"3.11","lines":12,
      "functions":[
        {"qualname":"<module>","name":"<module>","kind":"module","code":true,"def_line":1,"first_line":1,"body_line":1,"last_line":12,"statements":[[1,1]],"writes":{},"reads":{},"nested_reads":{},"calls":{}},
        {"qualname":"C.f","name":"f","kind":"function","code":true,"def_line":3,"first_line":2,"body_line":4,"last_line":9,"params":["self","n"],"parent":"C",
         "statements":[[2,3],[4,4],[5,5],[6,6]],"writes":{"3":["self","n"],"4":["t"]},"reads":{"5":["t","n"]},"nested_reads":{"6":["n"]},"calls":{"6":["sum"]},"future":1}],
      "loops":[{"func":"C.f","kind":"for","line":5,"header_end":5,"end_line":6,"body":[6,6],"body_first_line":6,"else":null,"depth":0,"parent":null}],
      "branches":[{"func":"C.f","kind":"if","line":4,"end_line":4,"test_end":4,"body_line":5,"else_line":null}],
      "handlers":[]}},"errors":{}}"#;

    #[test]
    fn facts_read_what_the_planner_needs() {
        let d: FactsDoc = serde_json::from_str(DOC).unwrap();
        let f = &d.files["/r/pkg/m.py"];
        let func = f.function_at("f", 2).unwrap();
        assert_eq!(func.qualname, "C.f");
        assert_eq!(f.function_at("f", 3).unwrap().qualname, "C.f");
        assert_eq!(func.class(), Some("C"));
        assert_eq!(func.span(), 8);
        assert_eq!(func.writes_at(4), ["t"]);
        let uses = func.uses();
        assert_eq!(uses[&5], ["t", "n"]);
        assert_eq!(uses[&6], ["n"]);
        assert_eq!(f.loops_of("C.f").count(), 1);
        assert_eq!(f.branches_of("C.f").count(), 1);
        assert!(f.function("<module>").unwrap().class().is_none());
    }
}

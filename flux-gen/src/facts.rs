//! Static facts of the repository's source files, computed by the image's own interpreter
//! (`python3 -m flux_hook.static_facts FILE...` in a container of the image: the AST of the
//! exact files the tests run, parsed by the Python that runs them).
//!
//! One reading of that JSON for the whole of flux: the types are [`flux_trace::facts`]'s (the
//! same facts the hook puts in traces for the extractors); this module adds the document
//! around them ([`FactsDoc`]) and what the planner asks of them ([`FileFactsExt`],
//! [`FunctionFactsExt`]).
use std::collections::BTreeMap;

pub use flux_trace::facts::{
    BranchFacts, FileFacts, FunctionFacts, HandlerFacts, LoopFacts, TryFacts,
};
use serde::{Deserialize, Serialize};

/// `{"version", "python", "files": {PATH: FileFacts}, "errors": {PATH: MESSAGE}}`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct FactsDoc {
    #[serde(default)]
    pub files: BTreeMap<String, FileFacts>,
    #[serde(default)]
    pub errors: BTreeMap<String, String>,
}

/// What the planner asks of a file's facts.
pub trait FileFactsExt {
    /// The function whose code object starts at `first_line` with name `name` (what a call
    /// event reports: `co_name`, `co_firstlineno`), if the file has it.
    fn code_named<'a>(&'a self, name: &str, first_line: u32) -> Option<&'a FunctionFacts>;
    /// The first scope named `qualname`.
    fn function<'a>(&'a self, qualname: &'a str) -> Option<&'a FunctionFacts>;
    fn branches_of<'a>(&'a self, qualname: &'a str) -> impl Iterator<Item = &'a BranchFacts>;
}

impl FileFactsExt for FileFacts {
    fn code_named<'a>(&'a self, name: &str, first_line: u32) -> Option<&'a FunctionFacts> {
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

    fn function<'a>(&'a self, qualname: &'a str) -> Option<&'a FunctionFacts> {
        self.functions_named(qualname).next()
    }

    fn branches_of<'a>(&'a self, qualname: &'a str) -> impl Iterator<Item = &'a BranchFacts> {
        self.branches.iter().filter(move |b| b.func == qualname)
    }
}

/// What the planner asks of a function's facts.
pub trait FunctionFactsExt {
    /// Source lines it spans, first line to last.
    fn span(&self) -> u32;
    /// Is it a plain function or method (not a lambda, comprehension, class body or module)?
    fn is_function(&self) -> bool;
    /// The class it is a method of (`A.B.m` → `A.B`), if any.
    fn class(&self) -> Option<&str>;
    /// `uses` for the def-use extractors: line → locals read there, by its own code and by
    /// nested scopes (SWE-Flux attributes reads in comprehensions to the enclosing function).
    fn uses(&self) -> BTreeMap<u32, Vec<String>>;
    /// Statements of its own (not of nested functions).
    fn statement_count(&self) -> usize;
}

impl FunctionFactsExt for FunctionFacts {
    fn span(&self) -> u32 {
        self.last_line.saturating_sub(self.first_line) + 1
    }

    fn is_function(&self) -> bool {
        matches!(self.kind.as_str(), "function" | "async_function")
    }

    fn class(&self) -> Option<&str> {
        let (owner, _) = self.qualname.rsplit_once('.')?;
        (!owner.contains("<locals>")).then_some(owner)
    }

    fn uses(&self) -> BTreeMap<u32, Vec<String>> {
        let mut out: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for m in [&self.reads, &self.nested_reads] {
            for (l, names) in m {
                let e = out.entry(*l).or_default();
                for n in names {
                    if !e.contains(n) {
                        e.push(n.clone());
                    }
                }
            }
        }
        out
    }

    fn statement_count(&self) -> usize {
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
        let func = f.code_named("f", 2).unwrap();
        assert_eq!(func.qualname, "C.f");
        assert_eq!(f.code_named("f", 3).unwrap().qualname, "C.f");
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

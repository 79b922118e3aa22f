//! The scout's reading of a calls-only trace of one test module: each function's dynamic
//! profile (invocations per test, callers and callees, depth below the test function, calls
//! made under its frames) and each test's outcome and footprint in the repository's code.
//!
//! Conventions:
//! - A function is a code object, keyed by (file, `co_name`, first line): what both witnesses
//!   report for a fresh call (USDT on 3.15 gives no qualname; the qualname comes later from the
//!   static facts of the file). Generator and coroutine resumptions are not calls. A JVM method
//!   (an event with a signature) is keyed by its qualname (`Outer.Inner.run`), line 0: the
//!   probes name the class; overloads are one function.
//! - An event belongs to the test whose `test_start` is the latest one before it and whose
//!   `test_end` has not come yet (pytest runs one test at a time); events outside every test
//!   are ignored (a scout runs with `scope = "tests"`, so there are few).
//! - Depth is counted from the test function's frame (the first frame in the test's window
//!   whose file is the test module and whose name is the test's function name): a function the
//!   test calls directly has depth 1. When the test frame is not seen, from the test's
//!   shallowest frame.
use flux_trace::{Kind, Trace};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A code object as the trace names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CodeKey {
    pub file: String,
    pub name: String,
    pub first_line: u32,
}

/// One function's behaviour over the module's tests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionProfile {
    /// Fresh calls in all tests.
    pub calls: u64,
    /// Fresh calls per test (index into [`ModuleProfile::tests`]).
    pub per_test: BTreeMap<usize, u64>,
    /// Direct callees (index into [`ModuleProfile::functions`]) and how often each is called.
    pub callees: BTreeMap<usize, u64>,
    /// Direct callers and how often each calls it.
    pub callers: BTreeMap<usize, u64>,
    /// Smallest and largest depth below the test function.
    pub min_depth: u32,
    pub max_depth: u32,
    /// Calls made under its frames, over all its calls (nested frames of itself counted in
    /// each, so recursion counts more than once): what tracing its extents costs.
    pub subtree_calls: u64,
    /// Its frames were resumed (a generator or coroutine).
    pub resumed: bool,
    /// Frames of it left by an exception (an unwinding return), where the trace says so.
    pub unwinds: u64,
}

/// One test of the module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TestProfile {
    pub nodeid: String,
    /// pytest's outcome (`passed`, `failed`, `skipped`, `error`), "" when no end was seen.
    pub outcome: String,
    /// Fresh calls in the test (all code).
    pub calls: u64,
    /// Each function called in the test (index into [`ModuleProfile::functions`]): its fresh
    /// calls and deepest depth there.
    pub functions: BTreeMap<usize, TestCalls>,
    /// Deepest depth below the test function.
    pub max_depth: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCalls {
    pub calls: u64,
    pub max_depth: u32,
}

/// The scout's result for one module.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleProfile {
    pub functions: Vec<CodeKey>,
    pub profiles: Vec<FunctionProfile>,
    pub tests: Vec<TestProfile>,
}

struct Open {
    activation: u64,
    func: usize,
    calls_at_entry: u64,
    depth: u32,
}

impl ModuleProfile {
    /// Read a calls trace (see the module doc).
    pub fn from_trace(trace: &Trace) -> ModuleProfile {
        let mut p = ModuleProfile::default();
        let mut index: HashMap<CodeKey, usize> = HashMap::new();
        let mut stacks: HashMap<(u32, u32), Vec<Open>> = HashMap::new();
        // Frame id → function, for resumptions (a resumption reports its current line).
        let mut frames: HashMap<u64, usize> = HashMap::new();
        let mut current: Option<usize> = None;
        // Depth of the test function's frame in the current test, once seen.
        let mut test_depth: Option<u32> = None;
        let mut test_fn = String::new();
        let mut test_file = String::new();
        let mut calls_total: u64 = 0;
        // Per test: frames seen before the test frame, with their raw depth (re-based later).
        let mut shallowest: u32 = u32::MAX;
        for e in &trace.events {
            match e.ev {
                Kind::TestStart => {
                    let i = p.tests.len();
                    p.tests.push(TestProfile {
                        nodeid: e.test.to_string(),
                        ..TestProfile::default()
                    });
                    current = Some(i);
                    test_depth = None;
                    shallowest = u32::MAX;
                    (test_file, test_fn) = test_function_of(&e.test);
                    stacks.clear();
                    frames.clear();
                }
                Kind::TestEnd => {
                    if let Some(i) = current {
                        if p.tests[i].nodeid == e.test {
                            p.tests[i].outcome = e.detail().outcome.to_string();
                            current = None;
                        }
                    }
                    stacks.clear();
                }
                Kind::Call => {
                    let Some(t) = current else { continue };
                    let stack = stacks.entry((e.pid, e.tid)).or_default();
                    let fresh = e.frame == 0 || e.frame == e.activation;
                    let key = CodeKey {
                        file: e.file().to_string(),
                        // A JVM method is named by class and method (`sig` set): a file
                        // holds its nested classes, whose methods may share a name.
                        name: if e.sig().is_empty() {
                            e.func().to_string()
                        } else {
                            e.qualname().to_string()
                        },
                        first_line: e.line,
                    };
                    let func = if fresh {
                        let n = index.len();
                        let f = *index.entry(key.clone()).or_insert(n);
                        if f == p.functions.len() {
                            p.functions.push(key);
                            p.profiles.push(FunctionProfile {
                                min_depth: u32::MAX,
                                ..FunctionProfile::default()
                            });
                        }
                        f
                    } else {
                        // A resumption: the function of the frame's first call.
                        match frames.get(&e.frame) {
                            Some(&f) => f,
                            None => continue,
                        }
                    };
                    if test_depth.is_none()
                        && *e.func() == test_fn
                        && (test_file.is_empty() || e.file().ends_with(&test_file))
                    {
                        test_depth = Some(e.depth);
                    }
                    shallowest = shallowest.min(e.depth);
                    let base = test_depth.unwrap_or(shallowest);
                    let depth = e.depth.saturating_sub(base);
                    if fresh {
                        frames.insert(if e.frame == 0 { e.activation } else { e.frame }, func);
                        calls_total += 1;
                        let fp = &mut p.profiles[func];
                        fp.calls += 1;
                        *fp.per_test.entry(t).or_insert(0) += 1;
                        fp.min_depth = fp.min_depth.min(depth);
                        fp.max_depth = fp.max_depth.max(depth);
                        if let Some(parent) = stack.last() {
                            let caller = parent.func;
                            *p.profiles[caller].callees.entry(func).or_insert(0) += 1;
                            *p.profiles[func].callers.entry(caller).or_insert(0) += 1;
                        }
                        let tp = &mut p.tests[t];
                        tp.calls += 1;
                        let tc = tp.functions.entry(func).or_default();
                        tc.calls += 1;
                        tc.max_depth = tc.max_depth.max(depth);
                        tp.max_depth = tp.max_depth.max(depth);
                    } else {
                        p.profiles[func].resumed = true;
                    }
                    stack.push(Open {
                        activation: e.activation,
                        func,
                        calls_at_entry: calls_total,
                        depth,
                    });
                }
                Kind::Return => {
                    let Some(stack) = stacks.get_mut(&(e.pid, e.tid)) else {
                        continue;
                    };
                    let Some(pos) = stack.iter().rposition(|o| o.activation == e.activation) else {
                        continue;
                    };
                    // Frames above it that never returned (lost to the test window's edge)
                    // are closed with it.
                    for o in stack.drain(pos..).rev() {
                        let _ = o.depth;
                        p.profiles[o.func].subtree_calls += calls_total - o.calls_at_entry;
                        if o.activation == e.activation && e.unwind {
                            p.profiles[o.func].unwinds += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        for fp in &mut p.profiles {
            if fp.min_depth == u32::MAX {
                fp.min_depth = 0;
            }
        }
        p
    }

    /// Index of the function `key`, if it ran.
    pub fn find(&self, key: &CodeKey) -> Option<usize> {
        self.functions.iter().position(|k| k == key)
    }

    /// Tests that passed.
    pub fn passed(&self) -> BTreeSet<&str> {
        self.tests
            .iter()
            .filter(|t| t.outcome == "passed")
            .map(|t| t.nodeid.as_str())
            .collect()
    }
}

/// The file and function name of a pytest node id: `a/tests/test_x.py::TestC::test_y[1]` →
/// (`a/tests/test_x.py`, `test_y`).
pub fn test_function_of(nodeid: &str) -> (String, String) {
    let mut parts = nodeid.split("::");
    let file = parts.next().unwrap_or("").to_string();
    let last = parts.last().unwrap_or("");
    let name = last.split('[').next().unwrap_or(last).to_string();
    (file, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flux_trace::{Event, Source};

    struct B {
        t: Trace,
        ts: u64,
        next: u64,
        stack: Vec<(u64, u32)>,
    }

    impl B {
        fn new() -> B {
            B {
                t: Trace::default(),
                ts: 0,
                next: 1,
                stack: Vec::new(),
            }
        }
        fn ev(&mut self, k: Kind) -> Event {
            self.ts += 1;
            Event::new(self.ts, 1, 1, k, Source::Usdt)
        }
        fn test(&mut self, id: &str) -> &mut Self {
            let mut e = self.ev(Kind::TestStart);
            e.test = id.into();
            self.t.events.push(e);
            self
        }
        fn end(&mut self, id: &str, outcome: &str) -> &mut Self {
            let mut e = self.ev(Kind::TestEnd);
            e.test = id.into();
            e.detail_mut().outcome = outcome.into();
            self.t.events.push(e);
            self
        }
        fn call(&mut self, file: &str, name: &str, line: u32) -> &mut Self {
            let a = self.next;
            self.next += 1;
            let mut e = self.ev(Kind::Call);
            e.code_mut().file = file.into();
            e.code_mut().func = name.into();
            e.line = line;
            e.activation = a;
            e.frame = a;
            e.parent = self.stack.last().map(|s| s.0).unwrap_or(0);
            e.depth = self.stack.len() as u32;
            self.stack.push((a, line));
            self.t.events.push(e);
            self
        }
        fn ret(&mut self) -> &mut Self {
            let (a, _) = self.stack.pop().unwrap();
            let mut e = self.ev(Kind::Return);
            e.activation = a;
            self.t.events.push(e);
            self
        }
    }

    #[test]
    fn profiles_count_calls_callees_depth_and_subtrees_per_test() {
        let mut b = B::new();
        b.call("/r/_pytest/runner.py", "runtest", 10);
        b.test("pkg/tests/test_m.py::test_a");
        b.call("/r/pkg/tests/test_m.py", "test_a", 3)
            .call("/r/pkg/m.py", "f", 1)
            .call("/r/pkg/m.py", "g", 9)
            .ret()
            .call("/r/pkg/m.py", "g", 9)
            .ret()
            .ret()
            .ret();
        b.end("pkg/tests/test_m.py::test_a", "passed");
        b.test("pkg/tests/test_m.py::test_b");
        b.call("/r/pkg/tests/test_m.py", "test_b", 7)
            .call("/r/pkg/m.py", "g", 9)
            .ret()
            .ret();
        b.end("pkg/tests/test_m.py::test_b", "failed");
        b.ret();
        let p = ModuleProfile::from_trace(&b.t);
        let names: Vec<&str> = p.functions.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["test_a", "f", "g", "test_b"]);
        let f = &p.profiles[1];
        let g = &p.profiles[2];
        assert_eq!((f.calls, f.min_depth, f.max_depth), (1, 1, 1));
        assert_eq!(f.callees, BTreeMap::from([(2, 2)]));
        assert_eq!(f.subtree_calls, 2);
        assert_eq!(g.calls, 3);
        assert_eq!(g.per_test, BTreeMap::from([(0, 2), (1, 1)]));
        assert_eq!(g.callers, BTreeMap::from([(1, 2), (3, 1)]));
        assert_eq!((g.min_depth, g.max_depth), (1, 2));
        assert_eq!(p.tests[0].outcome, "passed");
        assert_eq!(p.tests[1].outcome, "failed");
        assert_eq!(p.tests[0].calls, 4);
        assert_eq!(p.tests[0].max_depth, 2);
        assert_eq!(
            p.passed().into_iter().collect::<Vec<_>>(),
            ["pkg/tests/test_m.py::test_a"]
        );
    }

    #[test]
    fn node_ids_name_their_function() {
        assert_eq!(
            test_function_of("a/tests/test_x.py::TestC::test_y[1-2]"),
            ("a/tests/test_x.py".to_string(), "test_y".to_string())
        );
        assert_eq!(test_function_of("t.py::test_z").1, "test_z");
    }
}

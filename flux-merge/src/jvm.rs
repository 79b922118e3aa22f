//! HotSpot's method probes: from the kernel's method records to an oracle trace.
//!
//! The JVM has one witness (its `hotspot:method__entry/__return` probes; no in-process hook), so
//! this is the whole merge for a JVM: strings resolved, each thread's records walked with a
//! stack of activations, the frames of hidden classes left out, test windows marked. Its rules,
//! each counted (`meta.counts`, `jvm.*`) or a problem of the trace:
//!
//! | rule | what it says |
//! |---|---|
//! | `jvm-naming` | an event names its method by class, method and signature as the JVM's `Symbol`s spell them: `func` is the method's name (`<init>`, `lambda$main$0`), `sig` its descriptor, `module` the package (`org.apache.commons.lang3`), `qualname` the class within its package with member classes joined by `.` (`StringUtils.Inner`; anonymous and local classes keep `$1`) and the method (`StringUtils.Inner.isEmpty`), `file` the source file the class's outermost class is conventionally in (`org/apache/commons/lang3/StringUtils.java`), relative to its source root |
//! | `jvm-hidden-frames` | activations of hidden classes (lambda proxies `Main$$Lambda$14+0x…`, whose names change from run to run) are left out, counted; what they call is called by their caller |
//! | `jvm-stack` | per thread, an entry opens an activation and a return closes the innermost one, which must be the same method; a return that closes none, or another method, is a problem. A return may be an exit by exception: the probe does not tell them apart (`unwind` is never set) |
//! | `jvm-open-at-exit` | an activation still open when the process ended (a daemon thread's) is a problem |
//! | `jvm-test-windows` | an activation of a method named in [`JvmOptions::tests`] is a test: `test_start`/`test_end` around it, its id `<file>::<class>::<method>` |
//!
//! Invariants: never invents an event; anything unplaceable makes the trace incomplete; events
//! of a thread keep the kernel's order.
use crate::usdt::{capture_problems, Counters, Drained, RawMethod};
use flux_common::{KIND_CALL, KIND_RETURN};
use flux_trace::{Event, Kind, Meta, Name, Source, Trace};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What the JVM merge is told beyond the records.
#[derive(Clone, Debug, Default)]
pub struct JvmOptions {
    /// Test methods, as `<binary class name>.<method>` (`org.example.FooTest.testBar`; nested
    /// classes with `$`): each activation is a test window.
    pub tests: Vec<String>,
}

/// A method as the JVM names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Method {
    /// Internal class name (`org/example/Foo$Bar`).
    class: Name,
    name: Name,
    sig: Name,
}

/// Is this the internal name of a hidden class (a lambda proxy, a lambda form)? Their names
/// carry the address they were defined at (`+0x…`), or the `$$Lambda` of a lambda proxy.
pub fn is_hidden_class(class: &str) -> bool {
    class.contains("$$Lambda") || class.contains("+0x") || class.contains("/0x")
}

/// The names `jvm-naming` gives a method of `class` (internal form): (module, class's
/// qualname, file).
pub fn class_names(class: &str) -> (String, String, String) {
    let (pkg, simple) = match class.rfind('/') {
        Some(i) => (&class[..i], &class[i + 1..]),
        None => ("", class),
    };
    let outer = simple.split('$').next().unwrap_or(simple);
    let file = if pkg.is_empty() {
        format!("{outer}.java")
    } else {
        format!("{pkg}/{outer}.java")
    };
    // Member classes joined by `.`; `$` before a digit (anonymous, local classes) kept.
    let mut qual = String::with_capacity(simple.len());
    let mut parts = simple.split('$');
    qual.push_str(parts.next().unwrap_or(""));
    for p in parts {
        let member = p.chars().next().is_some_and(|c| !c.is_ascii_digit());
        qual.push(if member { '.' } else { '$' });
        qual.push_str(p);
    }
    (pkg.replace('/', "."), qual, file)
}

/// The test id of `jvm-test-windows`: `<file>::<class qualname split by .>::<method>`.
fn test_id(m: &Method) -> String {
    let (_, qual, file) = class_names(&m.class);
    format!("{file}::{}::{}", qual.replace('.', "::"), m.name)
}

#[derive(Default)]
struct Count {
    hidden: u64,
    methods: u64,
    tests: u64,
}

/// One method event of a thread: its timestamp, its kind code and the method.
type MethodEvent = (u64, u32, Method);

/// The JVM's oracle trace from one capture: `interpreter` labels it.
pub fn jvm_trace(drained: &Drained, c: &Counters, interpreter: &str, opts: &JvmOptions) -> Trace {
    let mut unresolved = 0u64;
    let mut evs: Vec<&RawMethod> = drained.methods.iter().collect();
    // Stable: equal timestamps keep ring-buffer order (per thread, program order).
    evs.sort_by_key(|e| e.ts);
    let get = |r: &RawMethod, i: usize| {
        drained
            .strings
            .get(&(r.host_tgid, r.strs[i].0, r.strs[i].1))
    };
    let mut threads: BTreeMap<(u32, u32), Vec<MethodEvent>> = BTreeMap::new();
    for r in evs {
        match (get(r, 0), get(r, 1), get(r, 2)) {
            (Some(class), Some(name), Some(sig)) => {
                let m = Method {
                    class: class.clone(),
                    name: name.clone(),
                    sig: sig.clone(),
                };
                threads
                    .entry((r.pid, r.tid))
                    .or_default()
                    .push((r.ts, r.kind, m));
            }
            _ => unresolved += 1,
        }
    }
    let tests: HashSet<&str> = opts.tests.iter().map(String::as_str).collect();
    let mut problems = capture_problems(drained, drained.delivered(), c, unresolved);
    if drained.methods.is_empty() && c.class_filtered == 0 {
        problems.push(
            "the JVM's method probes never fired: the JVM must run with -XX:+DTraceMethodProbes"
                .into(),
        );
    }
    let mut n = Count::default();
    let mut out = Vec::new();
    let mut next_act = 1u64;
    let mut names: HashMap<Method, MethodNames> = HashMap::new();
    for ((pid, tid), items) in &threads {
        walk(
            (*pid, *tid),
            items,
            &tests,
            &mut names,
            &mut next_act,
            &mut out,
            &mut n,
            &mut problems,
        );
    }
    // Stable: a thread's events are in order already; ties across threads keep thread order.
    out.sort_by_key(|e| e.ts);
    crate::merge::assign_tests(&mut out);
    let mut meta = Meta {
        complete: problems.is_empty(),
        interpreter: interpreter.to_string(),
        calls: "usdt".into(),
        lost_events: c.lost + unresolved,
        problems,
        ..Meta::default()
    };
    let mut trace = Trace {
        meta: Meta::default(),
        events: out,
        facts: Default::default(),
    };
    meta.counts = trace.count_by_kind();
    for (k, v) in [
        ("jvm.hidden_frames_dropped", n.hidden),
        ("jvm.class_filtered", c.class_filtered),
        ("jvm.methods", n.methods),
        ("jvm.test_windows", n.tests),
    ] {
        if v > 0 {
            meta.counts.insert(k.to_string(), v);
        }
    }
    trace.meta = meta;
    trace
}

struct Open {
    act: u64,
    method: Method,
    test: bool,
}

/// One thread's records, walked with a stack (rules `jvm-stack`, `jvm-hidden-frames`,
/// `jvm-open-at-exit`, `jvm-test-windows`).
#[expect(
    clippy::too_many_arguments,
    reason = "one thread's walk over the run's shared tables and outputs"
)]
fn walk(
    (pid, tid): (u32, u32),
    items: &[(u64, u32, Method)],
    tests: &HashSet<&str>,
    names: &mut HashMap<Method, MethodNames>,
    next_act: &mut u64,
    out: &mut Vec<Event>,
    n: &mut Count,
    problems: &mut Vec<String>,
) {
    let mut stack: Vec<Open> = Vec::new();
    let mut hidden: Vec<Method> = Vec::new();
    let mut seen_methods: HashSet<Method> = HashSet::new();
    let mut bad = 0u64;
    for (ts, kind, m) in items {
        if is_hidden_class(&m.class) {
            n.hidden += 1;
            // Balanced per thread like any frame: a hidden return closes a hidden entry.
            match *kind {
                KIND_CALL => hidden.push(m.clone()),
                _ => {
                    if hidden.pop().as_ref() != Some(m) {
                        bad += 1;
                        note(
                            problems,
                            bad,
                            pid,
                            tid,
                            *ts,
                            "a return of a hidden class's method that no entry of it opened",
                            m,
                        );
                    }
                }
            }
            continue;
        }
        let named = names
            .entry(m.clone())
            .or_insert_with(|| MethodNames::of(m))
            .clone();
        match *kind {
            KIND_CALL => {
                let act = *next_act;
                *next_act += 1;
                let parent = stack.last().map_or(0, |o| o.act);
                let test = !tests.is_empty() && {
                    let dotted = format!("{}.{}", m.class.replace('/', "."), m.name);
                    tests.contains(dotted.as_str())
                };
                if test {
                    n.tests += 1;
                    let mut s = Event::new(*ts, pid, tid, Kind::TestStart, Source::Usdt);
                    s.test = test_id(m).into();
                    out.push(s);
                }
                if seen_methods.insert(m.clone()) {
                    n.methods += 1;
                }
                let mut e = Event::new(*ts, pid, tid, Kind::Call, Source::Usdt);
                named.fill(&mut e);
                e.activation = act;
                e.frame = act;
                e.parent = parent;
                e.depth = stack.len() as u32;
                out.push(e);
                stack.push(Open {
                    act,
                    method: m.clone(),
                    test,
                });
            }
            KIND_RETURN => match stack.last() {
                Some(top) if top.method == *m => {
                    let top = stack.pop().expect("a top");
                    let mut e = Event::new(*ts, pid, tid, Kind::Return, Source::Usdt);
                    named.fill(&mut e);
                    e.activation = top.act;
                    e.frame = top.act;
                    e.parent = stack.last().map_or(0, |o| o.act);
                    e.depth = stack.len() as u32;
                    out.push(e);
                    if top.test {
                        let mut s = Event::new(*ts, pid, tid, Kind::TestEnd, Source::Usdt);
                        s.test = test_id(m).into();
                        s.detail_mut().outcome = "returned".into();
                        out.push(s);
                    }
                }
                _ => {
                    bad += 1;
                    let what = if stack.is_empty() {
                        "a return with no activation open"
                    } else {
                        "a return of another method than the innermost open one"
                    };
                    note(problems, bad, pid, tid, *ts, what, m);
                }
            },
            _ => {}
        }
    }
    if !stack.is_empty() || !hidden.is_empty() {
        let top = stack.last().map(|o| &o.method).or(hidden.last());
        problems.push(format!(
            "jvm-open-at-exit: thread {tid} of pid {pid} ended with {} activations open (innermost {})",
            stack.len() + hidden.len(),
            top.map_or_else(String::new, |m| format!("{}.{}{}", m.class, m.name, m.sig))
        ));
    }
    if bad > SHOWN {
        problems.push(format!(
            "jvm-stack: thread {tid} of pid {pid}: {} more returns could not be placed",
            bad - SHOWN
        ));
    }
}

/// Placement problems written out in full per thread.
const SHOWN: u64 = 10;

fn note(problems: &mut Vec<String>, bad: u64, pid: u32, tid: u32, ts: u64, what: &str, m: &Method) {
    if bad <= SHOWN {
        problems.push(format!(
            "jvm-stack: thread {tid} of pid {pid} at {ts}: {what} ({}.{}{})",
            m.class, m.name, m.sig
        ));
    }
}

/// The names `jvm-naming` gives a method, made once per method and shared by its events.
#[derive(Clone)]
struct MethodNames(flux_trace::Code);

impl MethodNames {
    fn of(m: &Method) -> MethodNames {
        let (module, qual, file) = class_names(&m.class);
        MethodNames(flux_trace::Code::new(flux_trace::CodeNames {
            func: Name::from(&m.name),
            qualname: format!("{qual}.{}", m.name).into(),
            module: module.into(),
            file: file.into(),
            sig: Name::from(&m.sig),
        }))
    }

    fn fill(&self, e: &mut Event) {
        e.code = self.0.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jvm_naming_of_classes() {
        assert_eq!(
            class_names("org/apache/commons/lang3/StringUtils"),
            (
                "org.apache.commons.lang3".into(),
                "StringUtils".into(),
                "org/apache/commons/lang3/StringUtils.java".into()
            )
        );
        assert_eq!(
            class_names("a/b/Outer$Inner$1$Local"),
            (
                "a.b".into(),
                "Outer.Inner$1.Local".into(),
                "a/b/Outer.java".into()
            )
        );
        assert_eq!(
            class_names("Top"),
            ("".into(), "Top".into(), "Top.java".into())
        );
        assert!(is_hidden_class(
            "fluxfixture/Main$$Lambda$14+0x0000000800c01a00"
        ));
        assert!(!is_hidden_class("fluxfixture/Main$1"));
    }

    fn raw(d: &mut Drained, ts: u64, tid: u32, kind: u32, class: &str, name: &str) {
        let mut key = |s: &str| -> (u64, u64) {
            let k = (s.len() as u64) << 8
                | s.bytes().fold(0u64, |a, b| a.wrapping_mul(31) + b as u64) & 0xff;
            d.strings.insert((1, k, 0), Name::from(s));
            (k, 0)
        };
        let strs = [key(class), key(name), key("()V")];
        d.methods.push(RawMethod {
            kind,
            ts,
            pid: 1,
            tid,
            host_tgid: 1,
            jtid: tid,
            strs,
        });
    }

    fn counters(d: &Drained) -> Counters {
        Counters {
            events: d.methods.len() as u64,
            ..Counters::default()
        }
    }

    #[test]
    fn jvm_stack_and_hidden_frames_and_test_windows() {
        let mut d = Drained::default();
        raw(&mut d, 1, 7, KIND_CALL, "p/FooTest", "testIt");
        raw(&mut d, 2, 7, KIND_CALL, "p/FooTest$$Lambda$3+0x1", "run");
        raw(&mut d, 3, 7, KIND_CALL, "p/Foo", "bar");
        raw(&mut d, 4, 7, KIND_RETURN, "p/Foo", "bar");
        raw(&mut d, 5, 7, KIND_RETURN, "p/FooTest$$Lambda$3+0x1", "run");
        raw(&mut d, 6, 7, KIND_RETURN, "p/FooTest", "testIt");
        let opts = JvmOptions {
            tests: vec!["p.FooTest.testIt".into()],
        };
        let t = jvm_trace(&d, &counters(&d), "java (17)", &opts);
        assert!(t.meta.complete, "{:?}", t.meta.problems);
        let kinds: Vec<_> = t
            .events
            .iter()
            .map(|e| (e.ev, e.qualname().as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                (Kind::TestStart, ""),
                (Kind::Call, "FooTest.testIt"),
                (Kind::Call, "Foo.bar"),
                (Kind::Return, "Foo.bar"),
                (Kind::Return, "FooTest.testIt"),
                (Kind::TestEnd, ""),
            ]
        );
        let bar = &t.events[2];
        assert_eq!(
            bar.parent, t.events[1].activation,
            "the lambda proxy is left out"
        );
        assert_eq!(
            (bar.depth, bar.file().as_str(), bar.module().as_str()),
            (1, "p/Foo.java", "p")
        );
        assert_eq!(bar.test, "p/FooTest.java::FooTest::testIt");
        assert_eq!(t.meta.counts["jvm.hidden_frames_dropped"], 2);
    }

    #[test]
    fn jvm_stack_problems_make_the_trace_incomplete() {
        let mut d = Drained::default();
        raw(&mut d, 1, 7, KIND_CALL, "p/A", "a");
        raw(&mut d, 2, 7, KIND_RETURN, "p/B", "b");
        let t = jvm_trace(&d, &counters(&d), "java", &JvmOptions::default());
        assert!(!t.meta.complete);
        assert!(
            t.meta.problems[0].contains("another method"),
            "{:?}",
            t.meta.problems
        );
        assert!(
            t.meta.problems[1].starts_with("jvm-open-at-exit"),
            "{:?}",
            t.meta.problems
        );
        let none = Drained::default();
        let t = jvm_trace(&none, &Counters::default(), "java", &JvmOptions::default());
        assert!(t.meta.problems[0].contains("-XX:+DTraceMethodProbes"));
    }
}

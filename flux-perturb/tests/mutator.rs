//! The AST mutator, run for real (host `python3`, or `$FLUX_PYTHON`): determinism, structure,
//! the assertion policy, the site rules and the validation of proposed edits.
use flux_perturb::{Assertions, Edit, Mutator, TestFile};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const SAMPLE: &str = r#"import pytest
from pkg import f, g, parse

# a comment that must survive
TEXT = 'Resources:\n  A: 1\n'
LONG = ('abc 1, '
        'def 2')


def helper(x):
    return f(x, 3)


def test_numbers():
    got = f(60984, 2**15, flag=True, mode='fast')
    assert got == {2: 3, 3: 2}
    assert (got, 1) == g(7, 8)


def test_strings():
    assert parse('1:02:03.5') == 3723.5
    assert parse(TEXT) is None, "message"


def test_collections():
    assert f([10, 20, 30], 99) == 5
    assert max(4, 9) > 0


def test_raises():
    with pytest.raises(ValueError, match='bad value'):
        f(2, 0)


def test_computed():
    a = f(5, 6)
    assert a == g(5, 6)
    assert all(x > 0 for x in f([1, 2], 3))


class TestGroup:
    def test_method(self):
        assert f(11, 12) == 13
"#;

fn mutator() -> Mutator {
    Mutator::default()
}

fn sample() -> Vec<TestFile> {
    vec![TestFile {
        path: "test_sample.py".into(),
        source: SAMPLE.into(),
    }]
}

fn python_parses(src: &str) -> bool {
    let py = flux_perturb::mutator::default_python();
    let out = Command::new(py)
        .args(["-c", "import ast,sys; ast.parse(sys.stdin.read())"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(src.as_bytes())?;
            c.wait()
        })
        .unwrap();
    out.success()
}

/// Lines of a variant's source without the import a relaxed `pytest.raises` appends at the
/// end (it moves no other line).
fn lines_kept(src: &str) -> usize {
    let imp = "from contextlib import suppress as _flux_suppress";
    let n = src.lines().count();
    if src.lines().last() == Some(imp) {
        n - 1
    } else {
        n
    }
}

fn test_names(src: &str) -> Vec<String> {
    let (_, tests) = mutator()
        .sites(
            &[TestFile {
                path: "t.py".into(),
                source: src.into(),
            }],
            "",
        )
        .unwrap();
    tests
}

#[test]
fn same_seed_same_bytes_different_seeds_differ() {
    let m = mutator();
    let a = m.mutate(&sample(), "", 7, 3, Assertions::Relax).unwrap();
    let b = m.mutate(&sample(), "", 7, 3, Assertions::Relax).unwrap();
    assert_eq!(a, b);
    assert!(a.changed());
    let mut distinct = BTreeSet::new();
    for seed in 1..=8 {
        let v = m.mutate(&sample(), "", seed, 3, Assertions::Relax).unwrap();
        assert!(v.changed(), "seed {seed} changed nothing");
        distinct.insert(v.files[0].source.clone());
    }
    assert!(
        distinct.len() >= 7,
        "only {} distinct variants of 8",
        distinct.len()
    );
}

#[test]
fn structure_is_kept() {
    let m = mutator();
    let names = test_names(SAMPLE);
    assert_eq!(
        names,
        [
            "test_numbers",
            "test_strings",
            "test_collections",
            "test_raises",
            "test_computed",
            "TestGroup.test_method"
        ]
    );
    for seed in 1..=30 {
        let v = m.mutate(&sample(), "", seed, 3, Assertions::Relax).unwrap();
        let src = &v.files[0].source;
        assert!(python_parses(src), "seed {seed} does not parse:\n{src}");
        assert_eq!(test_names(src), names, "seed {seed}");
        assert_eq!(
            lines_kept(src),
            SAMPLE.lines().count(),
            "seed {seed}: line count\n{src}"
        );
        assert!(src.contains("# a comment that must survive"));
        assert!(
            src.contains("def helper(x):\n    return f(x, 3)"),
            "helpers untouched"
        );
        assert_eq!(v.render, "splice", "seed {seed}");
        assert!(!v.mutations.is_empty() && v.mutations.len() <= 3);
        for mu in &v.mutations {
            assert_ne!(mu.old, mu.new, "{mu:?}");
        }
    }
}

#[test]
fn expected_values_messages_and_checks_are_never_sites() {
    let (sites, _) = mutator().sites(&sample(), "").unwrap();
    let texts: Vec<(u32, &str)> = sites.iter().map(|s| (s.line, s.text.as_str())).collect();
    // inputs
    for want in [
        "60984",
        "15",
        "True",
        "'fast'",
        "'1:02:03.5'",
        "[10, 20, 30]",
        "99",
        "7",
        "11",
    ] {
        assert!(
            texts.iter().any(|(_, t)| *t == want),
            "{want} should be a site: {texts:?}"
        );
    }
    // the module constants read by tests
    assert!(sites.iter().any(|s| s.function == "<module> TEXT"));
    assert!(
        !sites.iter().any(|s| s.function == "<module> LONG"),
        "LONG is read by no test"
    );
    // never: expected values, messages, pytest.raises arguments, helper bodies
    for (line, t) in [
        (21, "3723.5"),
        (22, "\"message\""),
        (32, "'bad value'"),
        (26, "5"),
        (43, "13"),
        (16, "{2: 3, 3: 2}"),
    ] {
        assert!(
            !texts.contains(&(line, t)),
            "{t} at {line} must not be a site: {texts:?}"
        );
    }
    assert!(
        !texts.iter().any(|(l, _)| *l == 11),
        "helper body is not a test"
    );
    // a literal quoted by the question is not a site
    let (quoted, _) = mutator()
        .sites(&sample(), "What happens for n = 60984 in mode 'fast'?")
        .unwrap();
    assert!(!quoted.iter().any(|s| s.text == "60984"));
    assert!(quoted.iter().any(|s| s.text == "99"));
}

#[test]
fn stale_assertions_are_relaxed_the_rest_kept() {
    let m = mutator();
    // Force a mutation in every test function via explicit edits.
    let edits = vec![
        Edit {
            file: None,
            line: 15,
            col: 0,
            old: "60984".into(),
            new: "60985".into(),
        },
        Edit {
            file: None,
            line: 21,
            col: 0,
            old: "'1:02:03.5'".into(),
            new: "'1:02:04.5'".into(),
        },
        Edit {
            file: None,
            line: 26,
            col: 0,
            old: "99".into(),
            new: "98".into(),
        },
        Edit {
            file: None,
            line: 32,
            col: 0,
            old: "0".into(),
            new: "1".into(),
        },
        Edit {
            file: None,
            line: 36,
            col: 0,
            old: "6".into(),
            new: "7".into(),
        },
    ];
    let v = m.apply(&sample(), "", &edits, Assertions::Relax).unwrap();
    assert!(v.rejected.is_empty(), "{:?}", v.rejected);
    assert_eq!(v.mutations.len(), 5);
    let src = &v.files[0].source;
    // comparisons against literals keep only what they compute; the old values are gone
    assert!(src.contains("\n    (got)\n"), "{src}");
    assert!(src.contains("\n    (parse('1:02:04.5'))\n"), "{src}");
    assert!(
        src.contains("\n    (parse(TEXT))\n"),
        "message dropped:\n{src}"
    );
    assert!(src.contains("\n    (f([10, 20, 30], 98))\n"), "{src}");
    assert!(src.contains("\n    (max(4, 9))\n"), "{src}");
    for stale in ["{2: 3, 3: 2}", "3723.5", "== 5", "> 0\n", "is None"] {
        assert!(!src.contains(stale), "{stale:?} survived:\n{src}");
    }
    // truth of a call: the call is kept, as a statement
    assert!(
        src.contains("\n    (all(x > 0 for x in f([1, 2], 3)))\n"),
        "{src}"
    );
    // computed vs computed: kept
    assert!(
        src.contains("\n    a = f(5, 7)\n    assert a == g(5, 6)\n"),
        "{src}"
    );
    assert!(
        src.contains("assert (got, 1) == g(7, 8)"),
        "computed comparison kept:\n{src}"
    );
    // pytest.raises relaxed to a suppress of the same exception, imported after the last line
    assert!(
        src.contains("with _flux_suppress(ValueError):\n        f(2, 1)"),
        "{src}"
    );
    assert!(
        src.ends_with("\nfrom contextlib import suppress as _flux_suppress\n"),
        "{src}"
    );
    assert_eq!(lines_kept(src), SAMPLE.lines().count());
    // a test whose inputs did not change keeps its asserts
    assert!(src.contains("assert f(11, 12) == 13"), "{src}");
    let lines: Vec<u32> = v.relaxed.iter().map(|r| r.line).collect();
    assert_eq!(lines, vec![16, 21, 22, 26, 27, 31, 38], "{:?}", v.relaxed);
    // keep: nothing relaxed
    let k = m.apply(&sample(), "", &edits, Assertions::Keep).unwrap();
    assert!(k.relaxed.is_empty());
    assert!(k.files[0].source.contains("assert got == {2: 3, 3: 2}"));
}

/// 14.8: a relaxed `assert f(...) == old_value` used to survive as the expression
/// `f(...) == old_value`, a false statement in the test a model reads. Now only the call
/// stays, lines do not move, and the file still parses and runs the same calls.
#[test]
fn relaxed_assertion_leaves_no_false_statement() {
    let src = "from pkg import f, g\n\n\ndef test_x():\n    assert f(3) == 9\n    assert g(\n        3,\n    ) == [\n        1,\n        2,\n    ], 'msg'\n    assert 0 < f(3) < g(4)\n    assert not f(3) and f(2) in (1, 2)\n    assert 1 == 1\n    x = 5\n";
    let files = vec![TestFile {
        path: "test_x.py".into(),
        source: src.into(),
    }];
    let edits = vec![Edit {
        file: None,
        line: 5,
        col: 14,
        old: "3".into(),
        new: "4".into(),
    }];
    let v = mutator()
        .apply(&files, "", &edits, Assertions::Relax)
        .unwrap();
    assert!(v.rejected.is_empty(), "{:?}", v.rejected);
    let out = &v.files[0].source;
    let want = "from pkg import f, g\n\n\ndef test_x():\n    (f(4))\n    (g(\n        3,\n    )\n\n\n)\n    (f(3), g(4))\n    if (not f(3)): (f(2))\n    pass\n    x = 5\n";
    assert_eq!(out, want, "got:\n{out}");
    assert_eq!(out.lines().count(), src.lines().count());
    assert!(python_parses(out));
    assert_eq!(v.relaxed.len(), 5);
}

/// What `and`/`or` guarded stays guarded: `assert t is None and m[0].ok` must not evaluate
/// `m[0]` when `t` is not None (a committed variant's test raised IndexError that way).
#[test]
fn relaxed_boolean_assertion_keeps_its_short_circuit() {
    let src = "def test_y():\n    t, m = parse(1)\n    assert t is None and m[0].ok(\n        1) == 2\n    assert t or not m\n    assert a(1) == 1 or b(2) == 2 or c(3) == 3\n";
    let files = vec![TestFile {
        path: "test_y.py".into(),
        source: src.into(),
    }];
    let edits = vec![Edit {
        file: None,
        line: 2,
        col: 18,
        old: "1".into(),
        new: "2".into(),
    }];
    let v = mutator()
        .apply(&files, "", &edits, Assertions::Relax)
        .unwrap();
    assert!(v.rejected.is_empty(), "{:?}", v.rejected);
    let out = &v.files[0].source;
    let want = "def test_y():\n    t, m = parse(2)\n    if (t is None): (m[0].ok(\n        1))\n    assert t or not m\n    if not (a(1) == 1 or b(2) == 2): (c(3))\n";
    assert_eq!(out, want, "got:\n{out}");
    assert!(python_parses(out));
}

#[test]
fn module_constants_relax_their_readers() {
    let edits = vec![Edit {
        file: None,
        line: 5,
        col: 8,
        old: r"'Resources:\n  A: 1\n'".into(),
        new: r"'Resources:\n  A: 2\n'".into(),
    }];
    let v = mutator()
        .apply(&sample(), "", &edits, Assertions::Relax)
        .unwrap();
    assert!(v.rejected.is_empty(), "{:?}", v.rejected);
    assert_eq!(v.mutations[0].function, "<module> TEXT");
    let fns: BTreeSet<&str> = v.relaxed.iter().map(|r| r.function.as_str()).collect();
    assert_eq!(fns, BTreeSet::from(["test_strings"]));
}

#[test]
fn proposed_edits_are_validated() {
    let edits = vec![
        // not a literal
        Edit {
            file: None,
            line: 15,
            col: 0,
            old: "60984".into(),
            new: "__import__('os')".into(),
        },
        // an expected value is not a site
        Edit {
            file: None,
            line: 21,
            col: 0,
            old: "3723.5".into(),
            new: "1.0".into(),
        },
        // does not parse
        Edit {
            file: None,
            line: 26,
            col: 0,
            old: "99".into(),
            new: "9 9".into(),
        },
        // the same value
        Edit {
            file: None,
            line: 15,
            col: 0,
            old: "True".into(),
            new: "True".into(),
        },
        // fine, found by its text and line although the column is wrong
        Edit {
            file: Some("test_sample.py".into()),
            line: 15,
            col: 99,
            old: "'fast'".into(),
            new: "'slow'".into(),
        },
    ];
    let v = mutator()
        .apply(&sample(), "", &edits, Assertions::Relax)
        .unwrap();
    assert_eq!(v.rejected.len(), 4, "{:?}", v.rejected);
    assert_eq!(v.mutations.len(), 1);
    assert!(v.files[0].source.contains("mode='slow'"));
}

#[test]
fn argument_order_is_mutated_where_valid() {
    let src = "from m import f, gcd\n\n\ndef test_x():\n    assert f(1, a=2, b=3) == gcd(4, 6)\n";
    let files = vec![TestFile {
        path: "test_x.py".into(),
        source: src.into(),
    }];
    let (sites, _) = mutator().sites(&files, "").unwrap();
    let kinds: BTreeSet<&str> = sites.iter().map(|s| s.kind.as_str()).collect();
    assert!(
        kinds.contains("kwargs") && kinds.contains("commutative"),
        "{kinds:?}"
    );
    let mut ops = BTreeSet::new();
    for seed in 1..=30 {
        let v = mutator()
            .mutate(&files, "", seed, 2, Assertions::Relax)
            .unwrap();
        assert!(python_parses(&v.files[0].source));
        assert!(v.mutations.len() <= 2);
        for m in v.mutations {
            ops.insert(m.op);
        }
    }
    assert!(
        ops.contains("kwargs-rotate") || ops.contains("commutative-swap"),
        "{ops:?}"
    );
}

fn starter_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("instances")
}

/// Every starter instance: 4 seeds each parse, keep the test names and the line count, and
/// change something.
#[test]
fn starter_instances_mutate_cleanly() {
    let dirs = flux_instance::discover(&[starter_root()]).unwrap();
    assert!(!dirs.is_empty());
    let m = mutator();
    for d in dirs {
        let inst = flux_instance::load_instance(&d).unwrap();
        let files = flux_perturb::mutator::read_test_files(&d, &inst.spec.test.files).unwrap();
        if files.is_empty() {
            // No Python test file (the JVM starter): the mutator rewrites Python tests only.
            assert!(inst.spec.interpreter.contains("/jvm/"), "{}", inst.id());
            continue;
        }
        let names: Vec<Vec<String>> = files.iter().map(|f| test_names(&f.source)).collect();
        for seed in 1..=4 {
            let v = m
                .mutate(&files, &inst.spec.question, seed, 3, Assertions::Relax)
                .unwrap();
            assert!(v.changed(), "{}: seed {seed} changed nothing", inst.id());
            for (f, (orig, n)) in v.files.iter().zip(files.iter().zip(&names)) {
                assert!(python_parses(&f.source), "{}: seed {seed}", inst.id());
                assert_eq!(&test_names(&f.source), n, "{}: seed {seed}", inst.id());
                assert_eq!(
                    lines_kept(&f.source),
                    orig.source.lines().count(),
                    "{} seed {seed}:\n{}",
                    inst.id(),
                    f.source
                );
            }
        }
    }
}

const TEXTS: &str = r#"import pytest
from pkg import parse, run

DOC = '{\n  "A": 1,\n  "B": [2, 3]\n}\n'
BLOCK = """x: 1
y: 2
"""


def test_text():
    assert parse(DOC) == {"A": 1}
    assert parse(BLOCK) == {"x": 1}


def test_js():
    assert run('function f(x){throw "big"}', 5) == -1


def test_info():
    with pytest.raises(ValueError) as e:
        parse('{"A": 2}')
    assert 'A' in str(e.value)
"#;

/// Text data: a one-line multi-line text can gain or lose a line (its records), a string quoted
/// inside a text can change; a multi-line literal never changes its line count; a `raises` whose
/// exception info is read stays.
#[test]
fn text_operators_and_kept_raises() {
    let files = vec![TestFile {
        path: "test_texts.py".into(),
        source: TEXTS.into(),
    }];
    let (sites, _) = mutator().sites(&files, "").unwrap();
    let ops = |text: &str| -> Vec<String> {
        sites
            .iter()
            .find(|s| s.text.starts_with(text))
            .unwrap_or_else(|| panic!("{text}: {sites:?}"))
            .ops
            .clone()
    };
    let doc = ops("'{\\n");
    assert!(
        doc.iter().any(|o| o == "str-line-dup") && doc.iter().any(|o| o == "str-line-drop"),
        "{doc:?}"
    );
    assert!(doc.iter().any(|o| o == "str-quoted"), "{doc:?}");
    let block = ops("\"\"\"x: 1");
    assert!(
        !block.iter().any(|o| o.starts_with("str-line")),
        "multi-line literal: {block:?}"
    );
    assert!(ops("'function").iter().any(|o| o == "str-quoted"));
    let mut seen = BTreeSet::new();
    for seed in 1..=40 {
        let v = mutator()
            .mutate(&files, "", seed, 3, Assertions::Relax)
            .unwrap();
        let src = &v.files[0].source;
        assert!(python_parses(src), "seed {seed}:\n{src}");
        assert_eq!(
            lines_kept(src),
            TEXTS.lines().count(),
            "seed {seed}:\n{src}"
        );
        assert!(
            src.contains("with pytest.raises(ValueError) as e:"),
            "seed {seed}:\n{src}"
        );
        for m in &v.mutations {
            seen.insert(m.op.clone());
            if m.op == "str-quoted" && m.old.contains("big") {
                assert!(!m.new.contains("\"big\""), "{m:?}");
            }
        }
    }
    for op in ["str-line-dup", "str-quoted"] {
        assert!(seen.contains(op), "{op} never chosen in 40 seeds: {seen:?}");
    }
}

/// A question that names a test: only that test's inputs are mutated (others cannot change
/// its answer); a question naming none leaves every test a candidate.
#[test]
fn a_question_naming_a_test_focuses_the_mutations() {
    let q = "Running test_sample.py, in its test `test_collections` only, ...";
    let mut fns = BTreeSet::new();
    for seed in 1..=12 {
        let v = mutator()
            .mutate(&sample(), q, seed, 3, Assertions::Relax)
            .unwrap();
        assert!(v.changed(), "seed {seed}");
        fns.extend(v.mutations.iter().map(|m| m.function.clone()));
    }
    assert_eq!(fns, BTreeSet::from(["test_collections".to_string()]));
    let mut all = BTreeSet::new();
    for seed in 1..=12 {
        let v = mutator()
            .mutate(&sample(), "", seed, 3, Assertions::Relax)
            .unwrap();
        all.extend(v.mutations.iter().map(|m| m.function.clone()));
    }
    assert!(all.len() >= 3, "{all:?}");
}

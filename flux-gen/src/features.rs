//! Difficulty features of an instance's test run, from the scout's profile (every call of the
//! module's tests) and the static facts: the SWE-Flux paper's measures, counted over the
//! repository's own code (`RepoSpec::is_target_file`: not its tests, not third-party code).
use crate::facts::{FileFacts, FileFactsExt, FunctionFactsExt};
use crate::profile::ModuleProfile;
use crate::spec::RepoSpec;
use flux_instance::Difficulty;
use std::collections::{BTreeMap, BTreeSet};

/// The features of a run of `tests` (node ids of the module).
pub fn difficulty(
    repo: &RepoSpec,
    profile: &ModuleProfile,
    facts: &BTreeMap<String, FileFacts>,
    tests: &[String],
) -> Difficulty {
    let mut d = Difficulty::default();
    let mut functions: BTreeSet<usize> = BTreeSet::new();
    let mut files: BTreeSet<&str> = BTreeSet::new();
    let mut classes: BTreeSet<(&str, &str)> = BTreeSet::new();
    for t in profile.tests.iter().filter(|t| tests.contains(&t.nodeid)) {
        for (&fid, tc) in &t.functions {
            let key = &profile.functions[fid];
            let Some(rel) = repo.relative(&key.file) else {
                continue;
            };
            if !repo.is_target_file(rel) {
                continue;
            }
            d.calls += tc.calls;
            d.depth = d.depth.max(u64::from(tc.max_depth));
            files.insert(rel);
            if functions.insert(fid) {
                let f = facts
                    .get(rel)
                    .and_then(|ff| ff.code_named(&key.name, key.first_line));
                if let Some(f) = f {
                    d.lines += u64::from(f.span());
                    if let Some(c) = f.class() {
                        classes.insert((rel, c));
                    }
                }
            }
        }
    }
    d.functions = functions.len() as u64;
    d.files = files.len() as u64;
    d.classes = classes.len() as u64;
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FunctionFacts;
    use crate::profile::{CodeKey, FunctionProfile, TestCalls, TestProfile};

    #[test]
    fn features_count_the_repositorys_code_in_the_tests_run() {
        let spec = crate::spec::parse(crate::spec::tests::GOOD, std::path::Path::new("g")).unwrap();
        let repo = &spec.repositories[0];
        let root = "/usr/local/lib/python3.11/dist-packages";
        let mut p = ModuleProfile::default();
        for (f, n, l) in [
            ("sympy/core/add.py", "flatten", 10),
            ("sympy/core/add.py", "helper", 50),
            ("sympy/core/tests/test_arit.py", "test_x", 1),
            ("mpmath/x.py", "g", 1),
        ] {
            p.functions.push(CodeKey {
                file: format!("{root}/{f}"),
                name: n.into(),
                first_line: l,
            });
            p.profiles.push(FunctionProfile::default());
        }
        let calls = |c, d| TestCalls {
            calls: c,
            max_depth: d,
        };
        p.tests.push(TestProfile {
            nodeid: "t::a".into(),
            functions: BTreeMap::from([(0, calls(3, 2)), (2, calls(1, 0)), (3, calls(9, 5))]),
            ..TestProfile::default()
        });
        p.tests.push(TestProfile {
            nodeid: "t::b".into(),
            functions: BTreeMap::from([(0, calls(1, 1)), (1, calls(2, 3))]),
            ..TestProfile::default()
        });
        let mut ff = FileFacts::default();
        for (q, first, last) in [("Add.flatten", 10, 40), ("helper", 50, 54)] {
            ff.functions.push(FunctionFacts {
                qualname: q.into(),
                name: q.rsplit('.').next().unwrap().into(),
                kind: "function".into(),
                code: true,
                def_line: first,
                first_line: first,
                last_line: last,
                ..FunctionFacts::default()
            });
        }
        let facts = BTreeMap::from([("sympy/core/add.py".to_string(), ff)]);
        let a = difficulty(repo, &p, &facts, &["t::a".into()]);
        assert_eq!(
            a,
            Difficulty {
                calls: 3,
                functions: 1,
                lines: 31,
                files: 1,
                classes: 1,
                depth: 2
            }
        );
        let ab = difficulty(repo, &p, &facts, &["t::a".into(), "t::b".into()]);
        assert_eq!(
            ab,
            Difficulty {
                calls: 6,
                functions: 2,
                lines: 36,
                files: 1,
                classes: 1,
                depth: 3
            }
        );
    }
}

//! Where an instance's package source is, and what to say when it is not there.
//!
//! Models are asked about code they must read, so a run without the source would score
//! nothing but guessing: a missing source stops `flux eval` before the first request (naming
//! the directory and the command that makes it), unless the run asks for no source on
//! purpose ([`Source::Off`], `--no-source`).
//!
//! The default is the cache's unpacked sources, `<cache>/src/<name>-<version>/`, which
//! `flux images source` fetches alone (no Docker) and `flux images build` writes too, for each
//! image's package (the cache is found as `flux harvest` finds it: `--cache`, `$FLUX_CACHE`,
//! the nearest `.flux-cache` above the working directory). The tree holds the repository's own
//! tests as well: the ones a question names are shown from it ([`crate::testsrc`]).

use std::path::{Path, PathBuf};

use flux_score::Instance;

/// Where sources come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `<cache>/src/<name>-<version>/` (the default).
    Cache(PathBuf),
    /// An explicit root: `<root>/<name>-<version>/` when it exists, else `<root>` itself.
    Root(PathBuf),
    /// No source at all (`--no-source`): the prompt says so.
    Off,
}

/// What [`locate`] found for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    Dir(PathBuf),
    Off,
    /// Not there: where it was looked for and what makes it.
    Missing {
        path: PathBuf,
        hint: String,
    },
}

impl Located {
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Located::Dir(d) => Some(d),
            _ => None,
        }
    }
}

fn usable(d: &Path) -> bool {
    std::fs::read_dir(d).is_ok_and(|mut rd| rd.next().is_some())
}

/// The command that makes an instance's source: `flux images source` fetches and unpacks it
/// alone (no Docker); its image's build unpacks it too.
pub fn build_hint(inst: &Instance) -> String {
    match inst.image.as_deref() {
        Some(img) => format!("flux images source {img}"),
        None => format!("flux images source {}", inst.repository),
    }
}

/// Find the source of one instance.
pub fn locate(inst: &Instance, source: &Source) -> Located {
    let named = inst.package_name_version().map(|(n, v)| format!("{n}-{v}"));
    match source {
        Source::Off => Located::Off,
        Source::Root(r) => {
            let cands: Vec<PathBuf> = named
                .iter()
                .map(|n| r.join(n))
                .chain(std::iter::once(r.clone()))
                .collect();
            match cands.iter().find(|p| usable(p)) {
                Some(p) => Located::Dir(p.clone()),
                None => Located::Missing {
                    path: cands[0].clone(),
                    hint: format!(
                        "pass a --source-root that holds it, or leave --source-root out to use \
                         the cache's source (`{}` makes it)",
                        build_hint(inst)
                    ),
                },
            }
        }
        Source::Cache(c) => match named {
            None => Located::Missing {
                path: c.join("src"),
                hint: "the instance names no `package = \"name==version\"`, so its source \
                       cannot be found; fix instance.toml"
                    .into(),
            },
            Some(n) => {
                let p = c.join("src").join(n);
                if usable(&p) {
                    Located::Dir(p)
                } else {
                    Located::Missing {
                        hint: format!(
                            "`{}` unpacks it into the cache {} (--cache DIR or FLUX_CACHE=DIR \
                             names another cache)",
                            build_hint(inst),
                            c.display()
                        ),
                        path: p,
                    }
                }
            }
        },
    }
}

/// One line per instance whose source is missing, for the error that stops a run.
pub fn missing_report(missing: &[(String, PathBuf, String)]) -> String {
    let mut s = format!(
        "no package source for {} instance(s); models would be asked about code they cannot read:\n",
        missing.len()
    );
    for (key, path, hint) in missing {
        s.push_str(&format!(
            "  {key}: {} does not exist or is empty; {hint}\n",
            path.display()
        ));
    }
    s.push_str("(pass --no-source to ask without any source on purpose)");
    s
}

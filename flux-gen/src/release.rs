//! Dated, living releases (issue 26.4): each repository version of a set carries its release
//! date, `flux gen --release NAME=VERSION` regenerates one repository for a new version while
//! the set keeps the old release's instances, and an instance says whether its target function
//! changed since the release before.
//!
//! - The date: PyPI's upload time of the pinned version's sdist (the file flux's images are
//!   built from; a wheel's when there is no sdist), read from PyPI's JSON API
//!   ([`pypi_release`]), or a date given by hand. It lives in `gen.toml`
//!   (`[[repository]] release`, [`RepoRelease`]) and on every instance
//!   (`[generated.release]`, [`flux_instance::ReleaseStamp`], written by [`stamp`]).
//! - The old release: [`archive`] renames each of the repository's instances
//!   `instances/<repo>/<id>` to `instances/<repo>/<id>@<version>` (its `id` too), so ids and
//!   directories carry the version and the new release's instances overwrite none of them;
//!   [`is_archived`] tells them apart, and writing or checking the set leaves them alone. The
//!   module results of the old release move to `<out>/modules/<repo>@<version>/`.
//! - What changed: a target function's source text in the new release against the previous
//!   one's ([`function_source`], [`target_change`]): `changed`, `unchanged` or `new`.
use crate::results::Candidate;
use crate::spec::{RepoRelease, RepoSpec};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The release date of `version` and its source from PyPI's JSON API answer: the project's
/// (`/pypi/<name>/json`, its `releases`) or the version's (`/pypi/<name>/<version>/json`, its
/// `urls`). The sdist's `upload_time_iso_8601`, else the earliest file's.
pub fn pypi_release(json: &Value, version: &str) -> Result<(String, String)> {
    let files = match json.get("releases") {
        Some(r) => r
            .get(version)
            .and_then(Value::as_array)
            .with_context(|| format!("PyPI lists no release {version}"))?,
        None => json
            .get("urls")
            .and_then(Value::as_array)
            .context("PyPI's answer has no `urls` (the version's files)")?,
    };
    let time = |f: &Value| {
        f.get("upload_time_iso_8601")
            .or_else(|| f.get("upload_time"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let sdist = files
        .iter()
        .find(|f| f.get("packagetype").and_then(Value::as_str) == Some("sdist"));
    let chosen = match sdist {
        Some(f) => Some(f),
        None => files
            .iter()
            .filter(|f| time(f).is_some())
            .min_by_key(|f| time(f)),
    };
    let Some(f) = chosen else {
        bail!("PyPI lists no file of this version");
    };
    let date = time(f).context("PyPI's file has no upload time")?;
    if flux_instance::release_day(&date).is_none() {
        bail!("PyPI's upload time `{date}` is not an ISO 8601 date");
    }
    let name = f.get("filename").and_then(Value::as_str).unwrap_or("?");
    Ok((date, format!("pypi:{name}")))
}

/// Is this instance directory (or id) one of an earlier release kept in the set
/// (`<id>@<version>`)? Generated ids never hold an `@`.
pub fn is_archived(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| n.to_string_lossy().contains('@'))
}

/// The source text of the function `qualname` (`Class.method`, `f.<locals>.g`, or a plain
/// name) in the Python module `text`: its decorators, `def` line and body, trailing blank lines
/// and trailing spaces left out. `None` when the module defines no such function. Read by
/// indentation (a line indented no deeper than the `def`, outside brackets, ends it), which is
/// how Python itself delimits a block.
pub fn function_source(text: &str, qualname: &str) -> Option<String> {
    let want: Vec<&str> = qualname.split('.').filter(|p| *p != "<locals>").collect();
    let lines: Vec<&str> = text.lines().collect();
    let starts = logical_starts(&lines);
    let indent = |l: &str| l.len() - l.trim_start().len();
    // (indent, name) of the enclosing `class`/`def` blocks.
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if !starts[i] || t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        while stack.last().is_some_and(|(d, _)| *d >= ind) {
            stack.pop();
        }
        let Some(name) = block_name(t) else { continue };
        stack.push((ind, name));
        let path: Vec<&str> = stack.iter().map(|(_, n)| n.as_str()).collect();
        if path == want && !t.starts_with("class ") {
            return Some(block_text(&lines, &starts, i, ind));
        }
    }
    None
}

/// `f` of `def f(`/`async def f(`/`class f(`/`class f:`.
fn block_name(t: &str) -> Option<String> {
    let rest = t
        .strip_prefix("async def ")
        .or_else(|| t.strip_prefix("def "))
        .or_else(|| t.strip_prefix("class "))?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// For each line: does a logical line start there (not inside brackets, a triple-quoted
/// string or after a backslash continuation)? Strings and comments are skipped when counting
/// brackets, so a `(` in a docstring does not swallow the rest of the module.
fn logical_starts(lines: &[&str]) -> Vec<bool> {
    let mut out = Vec::with_capacity(lines.len());
    let (mut depth, mut triple, mut cont) = (0i32, None::<&str>, false);
    for line in lines {
        out.push(depth <= 0 && triple.is_none() && !cont);
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some(q) = triple {
                match line[i..].find(q) {
                    Some(at) => {
                        i += at + 3;
                        triple = None;
                    }
                    None => i = b.len(),
                }
                continue;
            }
            match b[i] {
                b'#' => break,
                b'"' | b'\'' => {
                    let q = if b[i] == b'"' { "\"\"\"" } else { "\'\'\'" };
                    if line[i..].starts_with(q) {
                        triple = Some(q);
                        i += 3;
                        continue;
                    }
                    // A one-line string: to its unescaped closing quote.
                    let c = b[i];
                    i += 1;
                    while i < b.len() && b[i] != c {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                b'(' | b'[' | b'{' => {
                    depth += 1;
                    i += 1;
                }
                b')' | b']' | b'}' => {
                    depth -= 1;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        cont = triple.is_none() && line.trim_end().ends_with('\\');
    }
    out
}

/// The block of the `def` at line `at` (indent `ind`), with the decorators right above it.
fn block_text(lines: &[&str], starts: &[bool], at: usize, ind: usize) -> String {
    let mut start = at;
    while start > 0 && lines[start - 1].trim_start().starts_with('@') {
        start -= 1;
    }
    let mut end = at + 1;
    while end < lines.len() {
        let l = lines[end];
        let t = l.trim_start();
        if starts[end] && !t.is_empty() && l.len() - t.len() <= ind && !t.starts_with('#') {
            break;
        }
        end += 1;
    }
    while end > at + 1 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    lines[start..end]
        .iter()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The target `qualname` of `file` (relative to the source roots) in the new release against
/// the previous one: `changed`, `unchanged`, or `new` (not in the previous release); `None`
/// when the new release's source does not hold it (nothing to compare).
pub fn target_change(
    old_root: &Path,
    new_root: &Path,
    file: &str,
    qualname: &str,
) -> Option<&'static str> {
    let read = |root: &Path| std::fs::read_to_string(root.join(file)).ok();
    let now = function_source(&read(new_root)?, qualname)?;
    Some(
        match read(old_root).and_then(|t| function_source(&t, qualname)) {
            None => "new",
            Some(before) if before == now => "unchanged",
            Some(_) => "changed",
        },
    )
}

/// `[generated.release]` on each of `repo`'s candidates, when the spec dates the repository:
/// its version and date, and with both releases' sources at hand, whether the target changed.
pub fn stamp(
    repo: &RepoSpec,
    cands: &mut [Candidate],
    new_src: Option<&Path>,
    old_src: Option<&Path>,
) {
    let Some(rel) = &repo.release else { return };
    let (_, version) = repo.name_version();
    for c in cands.iter_mut() {
        let target = match (old_src, new_src, rel.previous.is_some()) {
            (Some(old), Some(new), true) if !c.function.is_empty() => {
                target_change(old, new, &c.file, &c.function).map(str::to_string)
            }
            _ => None,
        };
        if let Some(g) = c.spec.generated.as_mut() {
            g.release = Some(flux_instance::ReleaseStamp {
                version: version.to_string(),
                date: rel.date.clone(),
                source: rel.source.clone(),
                previous: rel.previous.clone(),
                target,
            });
        }
    }
}

/// The repository as the previous release was (its pin and image), if the spec names one.
pub fn previous_repo(repo: &RepoSpec) -> Option<RepoSpec> {
    let rel = repo.release.as_ref()?;
    let (name, _) = repo.name_version();
    let mut prev = repo.clone();
    prev.package = format!("{name}=={}", rel.previous.as_ref()?);
    prev.image = rel.previous_image.clone()?;
    prev.release = None;
    Some(prev)
}

/// What [`archive`] moved, for [`restore`].
#[derive(Debug, Default)]
pub struct Archived {
    /// (from, to) renames, in the order made.
    pub moved: Vec<(PathBuf, PathBuf)>,
}

/// Keep the current release of `repo` (at `version`) in the set under versioned ids: every
/// `instances/<repo>/<id>` not already archived becomes `<id>@<version>` (directory and
/// `id`), and `<out>/modules/<repo>` becomes `<out>/modules/<repo>@<version>` (so no module
/// result of the old release is taken for the new one).
pub fn archive(set_dir: &Path, out: &Path, repo: &str, version: &str) -> Result<Archived> {
    let mut done = Archived::default();
    let root = set_dir.join("instances").join(repo);
    let mut dirs: Vec<PathBuf> = match std::fs::read_dir(&root) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    dirs.retain(|d| d.join(flux_instance::INSTANCE_FILE).is_file() && !is_archived(d));
    dirs.sort();
    for d in dirs {
        let id = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let to = root.join(format!("{id}@{version}"));
        if to.exists() {
            restore(&done)?;
            bail!(
                "{}: already there (release {version} archived twice?)",
                to.display()
            );
        }
        std::fs::rename(&d, &to)?;
        done.moved.push((d.clone(), to.clone()));
        if let Err(e) = set_id(&to, &format!("{id}@{version}")) {
            restore(&done)?;
            return Err(e);
        }
    }
    let modules = out.join("modules").join(repo);
    if modules.is_dir() {
        let to = out.join("modules").join(format!("{repo}@{version}"));
        if to.exists() {
            restore(&done)?;
            bail!("{}: already there", to.display());
        }
        std::fs::rename(&modules, &to)?;
        done.moved.push((modules, to));
    }
    Ok(done)
}

/// Date the archived instances of `moved` that carry no release yet (a set made before it
/// dated releases): `[generated.release]` with `version`, `date` and `source`.
pub fn date_archived(a: &Archived, version: &str, date: &str, source: &str) -> Result<usize> {
    let mut n = 0;
    for (_, to) in &a.moved {
        let path = to.join(flux_instance::INSTANCE_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let mut doc: toml_edit::DocumentMut = text
            .parse()
            .with_context(|| format!("reading {}", path.display()))?;
        let Some(g) = doc.get_mut("generated").and_then(|g| g.as_table_mut()) else {
            continue;
        };
        if g.contains_key("release") {
            continue;
        }
        let mut t = toml_edit::Table::new();
        t["version"] = toml_edit::value(version);
        t["date"] = toml_edit::value(date);
        t["source"] = toml_edit::value(source);
        g.insert("release", toml_edit::Item::Table(t));
        std::fs::write(&path, doc.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// `id` of the instance.toml in `dir`, its other bytes kept.
fn set_id(dir: &Path, id: &str) -> Result<()> {
    let path = dir.join(flux_instance::INSTANCE_FILE);
    let text = std::fs::read_to_string(&path)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("reading {}", path.display()))?;
    doc["id"] = toml_edit::value(id);
    std::fs::write(&path, doc.to_string())?;
    Ok(())
}

/// Undo an [`archive`] (a failed `flux gen --release`): ids back, renames back.
pub fn restore(a: &Archived) -> Result<()> {
    for (from, to) in a.moved.iter().rev() {
        std::fs::rename(to, from)?;
        if from.join(flux_instance::INSTANCE_FILE).is_file() {
            let id = from.file_name().unwrap_or_default().to_string_lossy();
            set_id(from, &id)?;
        }
    }
    Ok(())
}

/// `gen.toml`'s text with repository `name` pinned to `version` in `image`, dated by
/// `release` (comments and the other entries kept byte for byte).
pub fn edit_spec(
    text: &str,
    (name, package): (&str, &str),
    version: &str,
    image: &str,
    release: &RepoRelease,
) -> Result<String> {
    let mut doc: toml_edit::DocumentMut = text.parse().context("gen.toml")?;
    let Some(repos) = doc
        .get_mut("repository")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
    else {
        bail!("gen.toml has no [[repository]]");
    };
    let Some(t) = repos
        .iter_mut()
        .find(|t| t.get("name").and_then(|v| v.as_str()) == Some(name))
    else {
        bail!("gen.toml has no repository `{name}`");
    };
    // An entry that inherited its pins from images.toml gets them written out: the new
    // version is pinned here.
    t["package"] = toml_edit::value(format!("{}=={version}", package.trim()));
    t["image"] = toml_edit::value(image);
    let mut it = toml_edit::InlineTable::new();
    it.insert("date", release.date.as_str().into());
    it.insert("source", release.source.as_str().into());
    if let Some(p) = &release.previous {
        it.insert("previous", p.as_str().into());
    }
    if let Some(p) = &release.previous_image {
        it.insert("previous_image", p.as_str().into());
    }
    t["release"] = toml_edit::value(it);
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "\
import os
X = \"\"\"a ( not closed
  and [ this neither\"\"\"  # nor {


class C:
    x = 1

    @staticmethod
    def f(a,
          b):
        if a:
            return b
        # a comment
        return a

    def g(self):
        def inner(y):
            return y + 1
        return inner(2)


def f():
    return 0
";

    #[test]
    fn a_function_is_its_decorators_signature_and_body() {
        assert_eq!(
            function_source(OLD, "C.f").unwrap(),
            "    @staticmethod\n    def f(a,\n          b):\n        if a:\n            return b\n        \
             # a comment\n        return a"
        );
        assert_eq!(function_source(OLD, "f").unwrap(), "def f():\n    return 0");
        assert_eq!(
            function_source(OLD, "C.g.<locals>.inner").unwrap(),
            "        def inner(y):\n            return y + 1"
        );
        assert!(function_source(OLD, "C.h").is_none());
        assert!(
            function_source(OLD, "C").is_none(),
            "a class is no function"
        );
    }

    /// Brackets were counted in strings too: a docstring's `(` (flask's `app.py`) hid every
    /// function after it, and 15 of 43 targets of a flask release went uncompared.
    #[test]
    fn a_bracket_in_a_string_or_comment_does_not_hide_the_functions_after_it() {
        let text = [
            "class A:",
            "    def f(self):",
            "        \"\"\"Returns (x or [y.",
            "",
            "        More.\"\"\"",
            "        s = ')' + \"[\"  # (",
            "        return s",
            "",
            "    def g(self):",
            "        return 1",
        ]
        .join("\n");
        let text = text.as_str();
        assert_eq!(
            function_source(text, "A.g").unwrap(),
            "    def g(self):\n        return 1"
        );
        assert!(function_source(text, "A.f").unwrap().ends_with("return s"));
    }

    #[test]
    fn a_target_changed_when_its_text_did_not_when_only_other_code_did() {
        let t = tempfile::tempdir().unwrap();
        let (old, new) = (t.path().join("old"), t.path().join("new"));
        std::fs::create_dir_all(old.join("pkg")).unwrap();
        std::fs::create_dir_all(new.join("pkg")).unwrap();
        std::fs::write(old.join("pkg/m.py"), OLD).unwrap();
        // Lines moved (an import added above) and `g` edited; `C.f` the same text.
        let edited = format!("import sys\n{}", OLD.replace("inner(2)", "inner(3)"))
            + "\n\ndef added():\n    pass\n";
        std::fs::write(new.join("pkg/m.py"), edited).unwrap();
        let ch = |q: &str| target_change(&old, &new, "pkg/m.py", q);
        assert_eq!(ch("C.f"), Some("unchanged"));
        assert_eq!(ch("C.g"), Some("changed"));
        assert_eq!(ch("added"), Some("new"));
        assert_eq!(ch("gone"), None);
        assert_eq!(target_change(&old, &new, "pkg/none.py", "f"), None);
    }

    #[test]
    fn the_release_date_is_the_sdists_upload_time() {
        let j = serde_json::json!({"urls": [
            {"packagetype": "bdist_wheel", "filename": "flask-3.1.2-py3-none-any.whl",
             "upload_time_iso_8601": "2025-08-19T19:34:40.123Z"},
            {"packagetype": "sdist", "filename": "flask-3.1.2.tar.gz",
             "upload_time_iso_8601": "2025-08-19T19:34:51.456Z"}]});
        assert_eq!(
            pypi_release(&j, "3.1.2").unwrap(),
            (
                "2025-08-19T19:34:51.456Z".to_string(),
                "pypi:flask-3.1.2.tar.gz".to_string()
            )
        );
        // The project's answer lists every release.
        let p = serde_json::json!({"releases": {"3.1.2": j["urls"], "3.1.3": []}});
        assert_eq!(
            pypi_release(&p, "3.1.2").unwrap().1,
            "pypi:flask-3.1.2.tar.gz"
        );
        assert!(pypi_release(&p, "3.1.3").is_err(), "no file");
        assert!(pypi_release(&p, "9.9").is_err(), "no release");
        // No sdist: the earliest wheel.
        let j = serde_json::json!({"urls": [
            {"packagetype": "bdist_wheel", "filename": "b.whl", "upload_time_iso_8601": "2024-02-02T00:00:00Z"},
            {"packagetype": "bdist_wheel", "filename": "a.whl", "upload_time_iso_8601": "2024-01-05T00:00:00Z"}]});
        assert_eq!(pypi_release(&j, "1").unwrap().1, "pypi:a.whl");
        assert!(pypi_release(&serde_json::json!({"urls": []}), "1").is_err());
        assert!(pypi_release(&serde_json::json!({"info": {}}), "1").is_err());
        let bad = serde_json::json!({"urls": [{"packagetype": "sdist", "upload_time_iso_8601": "yesterday"}]});
        assert!(pypi_release(&bad, "1").is_err());
    }

    #[test]
    fn release_days_are_checked() {
        use flux_instance::release_day;
        assert_eq!(release_day("2025-08-19T19:34:51Z"), Some("2025-08-19"));
        assert_eq!(release_day("2025-08-19"), Some("2025-08-19"));
        for bad in [
            "2025-13-01",
            "2025-8-19",
            "19.08.2025",
            "2025-08-19x",
            "",
            "2025-08-00",
        ] {
            assert_eq!(release_day(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_spec_gets_the_new_pin_image_and_date_and_keeps_its_comments() {
        let text =
            "# a comment\nname = \"s\"\nseed = 1\n\n[[repository]]\nname = \"a\"\npackage = \
                    \"a==1.0\"\nimage = \"flux/a:1.0-py3.11\"  # the image\n\n[[repository]]\nname \
                    = \"b\"\npackage = \"b==2.0\"\nimage = \"flux/b:2.0-py3.11\"\n";
        let rel = RepoRelease {
            date: "2025-01-02T03:04:05Z".into(),
            source: "pypi:b-2.1.tar.gz".into(),
            previous: Some("2.0".into()),
            previous_image: Some("flux/b:2.0-py3.11".into()),
        };
        let out = edit_spec(text, ("b", "b"), "2.1", "flux/b:2.1-py3.11", &rel).unwrap();
        assert!(out.starts_with("# a comment\n"));
        assert!(out.contains("package = \"a==1.0\"\nimage = \"flux/a:1.0-py3.11\"  # the image"));
        let doc: toml::Table = toml::from_str(&out).unwrap();
        let b = &doc["repository"].as_array().unwrap()[1];
        assert_eq!(b["package"].as_str(), Some("b==2.1"));
        assert_eq!(b["image"].as_str(), Some("flux/b:2.1-py3.11"));
        assert_eq!(b["release"]["previous"].as_str(), Some("2.0"));
        assert_eq!(b["release"]["date"].as_str(), Some("2025-01-02T03:04:05Z"));
        assert!(edit_spec(text, ("c", "c"), "1", "i", &rel).is_err());
    }

    /// The old release's instances get versioned ids and directories; restoring undoes it.
    #[test]
    fn archiving_versions_the_old_ids_and_restoring_undoes_it() {
        let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sets/flux-gen-v1");
        let src = flux_instance::discover(&[committed.join("instances/flask")]).unwrap();
        let t = tempfile::tempdir().unwrap();
        let (set, out) = (t.path().join("set"), t.path().join("out"));
        for d in &src[..2] {
            let to = set.join("instances/flask").join(d.file_name().unwrap());
            std::fs::create_dir_all(&to).unwrap();
            for f in [flux_instance::INSTANCE_FILE, flux_instance::ORACLE_FILE] {
                std::fs::copy(d.join(f), to.join(f)).unwrap();
            }
        }
        std::fs::create_dir_all(out.join("modules/flask")).unwrap();
        let a = archive(&set, &out, "flask", "3.1.3").unwrap();
        let now = flux_instance::discover(&[set.join("instances")]).unwrap();
        assert_eq!(now.len(), 2);
        for d in &now {
            assert!(is_archived(d), "{}", d.display());
            // A loadable instance: its id is its directory's name.
            let i = flux_instance::load_instance(d).unwrap();
            assert!(i.spec.id.ends_with("@3.1.3"));
        }
        assert!(out.join("modules/flask@3.1.3").is_dir());

        // Archiving again moves nothing: its instances are archived already.
        assert!(archive(&set, &out, "flask", "3.1.3").is_ok_and(|a| a.moved.is_empty()));
        restore(&a).unwrap();
        let back = flux_instance::discover(&[set.join("instances")]).unwrap();
        for (d, s) in back.iter().zip(&src) {
            assert_eq!(d.file_name(), s.file_name());
            assert_eq!(
                std::fs::read(d.join(flux_instance::INSTANCE_FILE)).unwrap(),
                std::fs::read(s.join(flux_instance::INSTANCE_FILE)).unwrap()
            );
        }
        // Archived for good: dated once, with the old release's date.
        let a = archive(&set, &out, "flask", "3.1.3").unwrap();
        assert_eq!(
            date_archived(&a, "3.1.3", "2025-01-01", "given").unwrap(),
            2
        );
        for d in &now {
            let i = flux_instance::load_instance(d).unwrap();
            let r = i.spec.generated.unwrap().release.unwrap();
            assert_eq!(
                (r.version.as_str(), r.date.as_str()),
                ("3.1.3", "2025-01-01")
            );
        }
        assert_eq!(
            date_archived(&a, "3.1.3", "2026-01-01", "given").unwrap(),
            0
        );
    }
}

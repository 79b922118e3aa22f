//! A Java project's layer: its Debian source package fetched and unpacked on the host (`apt-get
//! source`, the tree under `<cache>/src/<name>-<version>/`), then, in a container of a JDK base
//! (network off), copied to `/testbed` and compiled there with the JDK's `javac` against the
//! jars of Debian's packages (`/usr/share/java`, the jars Debian's Maven repository
//! `/usr/share/maven-repo` links to): the main code into `target/classes`, the upstream test
//! suite into `target/test-classes`; a launcher `flux-junit` runs tests with Debian's JUnit
//! console launcher. See [`super`] and `images/README.md`.
//!
//! Why not Debian's own build (`dh --buildsystem=maven`): it turns most of these test suites
//! off (`maven.test.skip=true` where a test dependency such as junit-pioneer is not packaged),
//! and a benchmark needs them. Compiling with `javac` against the same Debian jars builds the
//! suite offline and the same way every time; the few test files that need what Debian does not
//! package are left out by name (`exclude_tests`), never silently.
//!
//! Architecture invariant: nothing of the package is built or run on the host (its source is
//! only fetched and unpacked there, by `apt-get source` and `dpkg-source -x`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{
    build_hint, commit, hash_json, identity, lines, manifest_path, now_rfc3339, read_run_file,
    remove_replaced, run_build_container, run_cmd, source, tools_dir, up_to_date, write_json,
    write_manifest, Action, BaseDef, BuildConfig, IdentityInputs, ImageSource, Interpreter,
    Manifest, Settings, TreeDigest, MANIFEST_SCHEMA, TESTBED, TOOLS_IN_CONTAINER,
};
use crate::error::{Error, Result};
use crate::runtime::{Mount, Runtime};

/// Where Debian's jars are in a JDK base.
pub const JARS: &str = "/usr/share/java";
/// The test launcher installed in a Java image: `flux-junit [JUnit console options]`.
pub const LAUNCHER: &str = "/usr/local/bin/flux-junit";
/// The test runtime classpath of `/testbed`, one line, written at build time.
pub const CLASSPATH_FILE: &str = "/testbed/.flux/classpath";

/// A Java project `<namespace>/<name>:<version>-jdk<N>` (`[[java]]` in `images.toml`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JavaDef {
    /// `commons-lang3`.
    pub name: String,
    /// The upstream version (`3.12.0`): the image's tag.
    pub version: String,
    /// Debian's source package and its exact version (`apt-get source NAME=VERSION`).
    pub debian_source: String,
    pub debian_version: String,
    /// Name of a `[[base]]` with `java` set.
    pub base: String,
    /// The project's packages (`org.apache.commons.lang3.`): the class prefixes a trace keeps.
    pub classes: Vec<String>,
    /// Jars of `/usr/share/java` (without `.jar`) the main code compiles against.
    #[serde(default)]
    pub main_jars: Vec<String>,
    /// Jars of `/usr/share/java` the test suite compiles and runs against (JUnit's own come
    /// with the launcher).
    #[serde(default)]
    pub test_jars: Vec<String>,
    /// Test sources (relative to `/testbed`) left out: they need what Debian does not package.
    #[serde(default)]
    pub exclude_tests: Vec<String>,
    /// `javac --release N` (the project's own target, where JDK 17's newer API would make old
    /// code ambiguous, e.g. `Collection.toArray(null)`); default: the JDK's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<u32>,
    #[serde(default = "super::default_true")]
    pub default: bool,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Deadline of the whole suite in `flux images test` (default 3600 s).
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// `settings.namespace`, filled in by `Definitions::parse`.
    #[serde(skip)]
    pub namespace: String,
}

impl JavaDef {
    pub fn image(&self, base: &BaseDef) -> String {
        let ns = if self.namespace.is_empty() {
            "flux"
        } else {
            &self.namespace
        };
        format!(
            "{ns}/{}:{}-jdk{}",
            self.name,
            self.version,
            base.java.as_deref().unwrap_or("")
        )
    }

    /// What `package` of an instance names: `<name>==<version>`.
    pub fn package_pin(&self) -> String {
        format!("{}=={}", self.name, self.version)
    }

    pub(super) fn check(&self, base: &BaseDef) -> std::result::Result<(), String> {
        if base.java.is_none() {
            return Err(format!(
                "java {}: base {} is not a JDK base (no `java`)",
                self.name, base.name
            ));
        }
        if self.classes.is_empty() || self.classes.len() > 8 {
            return Err(format!(
                "java {}: `classes` needs 1 to 8 package prefixes",
                self.name
            ));
        }
        let bad_jar = |j: &String| j.is_empty() || j.contains('/') || j.contains("..");
        if let Some(j) = self
            .main_jars
            .iter()
            .chain(&self.test_jars)
            .find(|j| bad_jar(j))
        {
            return Err(format!(
                "java {}: jar {j:?} is not a name in {JARS}",
                self.name
            ));
        }
        if self
            .exclude_tests
            .iter()
            .any(|p| p.starts_with('/') || p.contains("..") || p.contains('\n'))
        {
            return Err(format!(
                "java {}: exclude_tests must be relative paths inside /testbed",
                self.name
            ));
        }
        Ok(())
    }
}

/// What a Java image is built from.
fn definition(settings: &Settings, j: &JavaDef, b: &BaseDef) -> serde_json::Value {
    serde_json::json!({
        "name": j.name, "version": j.version, "debian_source": j.debian_source,
        "debian_version": j.debian_version, "classes": j.classes, "main_jars": j.main_jars,
        "test_jars": j.test_jars, "exclude_tests": j.exclude_tests, "release": j.release,
        "layout": "javac-v1",
        "base": super::base_definition(settings, b),
    })
}

/// The stamp of a fetched Debian source tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct DebStamp {
    source: String,
    version: String,
    suite: String,
    mirror: String,
    /// The `.dsc` and the files it lists, with their sha256 (as apt checked them).
    files: BTreeMap<String, String>,
    tree_sha256: String,
    entries: u64,
}

/// `apt-get` with flux's own state under `<cache>/debsrc/apt` (a `deb-src` line for the base's
/// suite and mirror), so the host's apt configuration is neither read nor changed.
fn apt(cache_dir: &Path, settings: &Settings, suite: &str) -> Result<Command> {
    let root = cache_dir.join("debsrc").join("apt").join(suite);
    let lists = root.join("lists");
    std::fs::create_dir_all(lists.join("partial"))
        .map_err(|e| Error::io(format!("create {}", lists.display()), e))?;
    let sources = root.join("sources.list");
    std::fs::write(
        &sources,
        format!("deb-src {} {suite} main\n", settings.mirror),
    )
    .map_err(|e| Error::io(format!("write {}", sources.display()), e))?;
    let mut c = Command::new("apt-get");
    c.arg("-q")
        .arg(format!("-oDir::Etc::SourceList={}", sources.display()))
        .arg("-oDir::Etc::SourceParts=/dev/null")
        .arg(format!("-oDir::State::Lists={}", lists.display()))
        .arg("-oAPT::Sandbox::User=root");
    Ok(c)
}

/// The unpacked tree of `j`'s Debian source under `<cache>/src/<name>-<version>/`, fetched
/// (`apt-get source --download-only`) and unpacked (`dpkg-source -x`, Debian's patches
/// applied) unless its stamp says it is there and the tree still has the stamp's digest.
fn ensure_source(
    cache_dir: &Path,
    settings: &Settings,
    j: &JavaDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(PathBuf, DebStamp)> {
    let tree = source::tree_dir(cache_dir, &j.name, &j.version);
    let stamp_path = cache_dir.join("src").join(format!(
        "{}.debsrc.json",
        source::tree_name(&j.name, &j.version)
    ));
    if let Some(s) = std::fs::read_to_string(&stamp_path)
        .ok()
        .and_then(|t| serde_json::from_str::<DebStamp>(&t).ok())
    {
        let same = s.source == j.debian_source && s.version == j.debian_version;
        if same && tree.is_dir() && source::tree_digest(&tree)?.0 == s.tree_sha256 {
            return Ok((tree, s));
        }
    }
    let dl = cache_dir
        .join("debsrc")
        .join(format!("{}_{}", j.debian_source, j.debian_version));
    if dl.exists() {
        std::fs::remove_dir_all(&dl)
            .map_err(|e| Error::io(format!("remove {}", dl.display()), e))?;
    }
    std::fs::create_dir_all(&dl).map_err(|e| Error::io(format!("create {}", dl.display()), e))?;
    progress(&format!(
        "{}: apt-get source {}={} ({})",
        j.name, j.debian_source, j.debian_version, b.suite
    ));
    run_cmd(
        apt(cache_dir, settings, &b.suite)?.arg("update"),
        "apt-get update (deb-src)",
    )?;
    run_cmd(
        apt(cache_dir, settings, &b.suite)?
            .current_dir(&dl)
            .args(["source", "--download-only"])
            .arg(format!("{}={}", j.debian_source, j.debian_version)),
        &format!("apt-get source {}={}", j.debian_source, j.debian_version),
    )?;
    let mut files = BTreeMap::new();
    let mut dsc = None;
    for e in std::fs::read_dir(&dl).map_err(|e| Error::io(format!("list {}", dl.display()), e))? {
        let p = e
            .map_err(|e| Error::io(format!("list {}", dl.display()), e))?
            .path();
        if !p.is_file() {
            continue;
        }
        let bytes = std::fs::read(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))?;
        let name = p
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".dsc") {
            dsc = Some(p.clone());
        }
        files.insert(name, super::sha256_hex(&bytes));
    }
    let dsc = dsc.ok_or_else(|| Error::Build {
        image: j.name.clone(),
        message: format!("apt-get source left no .dsc in {}", dl.display()),
    })?;
    let tmp = tree.with_extension("tmp");
    for d in [&tmp, &tree] {
        if d.exists() {
            std::fs::remove_dir_all(d)
                .map_err(|e| Error::io(format!("remove {}", d.display()), e))?;
        }
    }
    run_cmd(
        Command::new("dpkg-source").arg("-x").arg(&dsc).arg(&tmp),
        &format!("dpkg-source -x {}", dsc.display()),
    )?;
    std::fs::rename(&tmp, &tree)
        .map_err(|e| Error::io(format!("rename to {}", tree.display()), e))?;
    let (tree_sha256, entries) = source::tree_digest(&tree)?;
    let stamp = DebStamp {
        source: j.debian_source.clone(),
        version: j.debian_version.clone(),
        suite: b.suite.clone(),
        mirror: settings.mirror.clone(),
        files,
        tree_sha256,
        entries,
    };
    write_json(&stamp_path, &stamp)?;
    Ok((tree, stamp))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn jar_path(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{JARS}/{n}.jar"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The build script run in the base (network off): copy, compile main and tests, the
/// launcher, read-only tree, user flux, digests.
fn script(j: &JavaDef, b: &BaseDef) -> String {
    let java_home = b
        .interpreter
        .strip_suffix("/bin/java")
        .unwrap_or("/usr/lib/jvm/default-java");
    let excludes: String = j.exclude_tests.iter().map(|p| format!("{p}\n")).collect();
    let test_cp = jar_path(&j.test_jars);
    let runtime_cp = [
        "/testbed/target/test-classes".to_string(),
        "/testbed/target/classes".to_string(),
        jar_path(&j.main_jars),
        test_cp.clone(),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join(":");
    let launcher = format!(
        "#!/bin/sh\n\
         # flux-junit [JUnit console launcher options]: the tests of /testbed, offline.\n\
         # FLUX_JAVA_OPTS: options of the JVM (the tracer adds its own through JAVA_TOOL_OPTIONS).\n\
         cd /testbed || exit 2\n\
         exec {java_home}/bin/java ${{FLUX_JAVA_OPTS:-}} -jar {JARS}/junit-platform-console-standalone.jar \
         --disable-banner --disable-ansi-colors --details=none \
         --class-path \"$(cat {CLASSPATH_FILE})\" \"$@\"\n"
    );
    let release = j
        .release
        .map_or_else(String::new, |r| format!("--release {r} "));
    format!(
        "set -eu\n\
         JAVAC=\"{java_home}/bin/javac\"\n\
         mkdir -p {TESTBED}\n\
         cp -a /flux/src/. {TESTBED}/\n\
         cd {TESTBED}\n\
         find src/main/java -name '*.java' | LC_ALL=C sort > /flux/run/main-files\n\
         $JAVAC {release}-nowarn -encoding UTF-8 -proc:none -g -d target/classes -cp {main_cp} \
           @/flux/run/main-files > /flux/run/javac-main.log 2>&1 || {{ tail -40 /flux/run/javac-main.log; exit 1; }}\n\
         if [ -d src/main/resources ]; then cp -a src/main/resources/. target/classes/; fi\n\
         printf '%s' {excludes} > /flux/run/exclude-tests\n\
         find src/test/java -name '*.java' | LC_ALL=C sort | grep -v -x -F -f /flux/run/exclude-tests > /flux/run/test-files || true\n\
         $JAVAC {release}-nowarn -encoding UTF-8 -proc:none -g -d target/test-classes \
           -cp target/classes:{test_cp} @/flux/run/test-files > /flux/run/javac-test.log 2>&1 || {{ tail -40 /flux/run/javac-test.log; exit 1; }}\n\
         if [ -d src/test/resources ]; then cp -a src/test/resources/. target/test-classes/; fi\n\
         mkdir -p .flux\n\
         printf '%s\\n' {runtime_cp} > .flux/classpath\n\
         (cd target/test-classes && find . -name '*.class' | sed 's|^\\./||; s|\\.class$||; s|/|.|g' | LC_ALL=C sort) > .flux/test-classes\n\
         printf '%s' {launcher} > {LAUNCHER}\n\
         chmod 0755 {LAUNCHER}\n\
         chown -R 0:0 {TESTBED}\n\
         chmod -R a-w {TESTBED}\n\
         sed -n 's/^JAVA_VERSION=\"\\(.*\\)\"/\\1/p' {java_home}/release > /flux/run/java-version\n\
         grep -q '^flux:' /etc/group || echo 'flux:x:1000:' >> /etc/group\n\
         grep -q '^flux:' /etc/passwd || echo 'flux:x:1000:1000:flux:/home/flux:/bin/sh' >> /etc/passwd\n\
         mkdir -p /home/flux /flux/run\n\
         chown 1000:1000 /home/flux\n\
         python3 {tools}/image_tools.py digest /flux/src {TESTBED} /usr/local/bin > /flux/run/digest.json\n",
        main_cp = shell_quote(&format!(".:{}", jar_path(&j.main_jars))),
        test_cp = shell_quote(&format!("{test_cp}:{JARS}/junit-platform-console-standalone.jar")),
        excludes = shell_quote(&excludes),
        runtime_cp = shell_quote(&runtime_cp),
        launcher = shell_quote(&launcher),
        tools = TOOLS_IN_CONTAINER,
    )
}

/// Builds (or finds up to date) the image of `j` on `b`.
pub(super) async fn build(
    rt: &Runtime,
    config: &BuildConfig,
    settings: &Settings,
    j: &JavaDef,
    b: &BaseDef,
    progress: &mut dyn FnMut(&str),
) -> Result<(Action, Manifest)> {
    let image = j.image(b);
    let base_image = b.image();
    let base_id = rt
        .image_id(&base_image)
        .await?
        .ok_or_else(|| Error::ImageMissing {
            image: base_image.clone(),
            hint: build_hint(&base_image),
        })?;
    let started = Instant::now();
    let (tree, stamp) = ensure_source(&config.cache_dir, settings, j, b, progress)?;
    let definition = definition(settings, j, b);
    let definition_hash = hash_json(&definition);
    if let Some(m) = up_to_date(rt, config, &image, &definition_hash, Some(&base_id)).await? {
        let same_tree = m
            .source
            .as_ref()
            .is_some_and(|s| s.info.tree_sha256 == stamp.tree_sha256);
        if same_tree {
            return Ok((Action::Skipped, m));
        }
    }
    let base_manifest = Manifest::load(&manifest_path(&config.cache_dir, &base_image))?;
    progress(&format!(
        "{image}: compiling {} {} with javac offline in {base_image}, source at {TESTBED}",
        j.debian_source, j.debian_version
    ));
    let run_dir = config
        .cache_dir
        .join("build")
        .join(image.replace(['/', ':'], "_"));
    let mounts = vec![
        Mount::read_only(&tree, "/flux/src"),
        Mount::read_only(tools_dir(&config.cache_dir)?, TOOLS_IN_CONTAINER),
    ];
    let c = run_build_container(rt, &base_image, &script(j, b), &run_dir, mounts).await?;
    let fail = |message: String| Error::Build {
        image: image.clone(),
        message,
    };
    let mut trees: BTreeMap<String, Option<TreeDigest>> =
        serde_json::from_str(&read_run_file(&run_dir, "digest.json")?)
            .map_err(|e| fail(format!("digest.json: {e}")))?;
    // The source as mounted must be the tree on the host; /testbed has the build's outputs too.
    let mounted = trees.remove("/flux/src").flatten();
    if mounted.as_ref().map(|d| d.sha256.as_str()) != Some(stamp.tree_sha256.as_str()) {
        let _ = c.remove().await;
        return Err(fail(format!(
            "the source seen in the build ({mounted:?}) is not the tree in {} ({})",
            tree.display(),
            stamp.tree_sha256
        )));
    }
    let mut manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        image: image.clone(),
        kind: "java".into(),
        image_id: None,
        definition_hash,
        definition,
        base_image: Some(base_image),
        base_image_id: Some(base_id),
        suite: b.suite.clone(),
        mirror: settings.mirror.clone(),
        debootstrap_date: base_manifest.debootstrap_date.clone(),
        suite_release_date: base_manifest.suite_release_date.clone(),
        interpreter: Interpreter {
            path: b.interpreter.clone(),
            version: read_run_file(&run_dir, "java-version")?.trim().to_owned(),
        },
        // The project under test, as an instance's `package` names it.
        pip_freeze: vec![j.package_pin()],
        wheels: Vec::new(),
        debian_packages: Vec::new(),
        identity: String::new(),
        identity_inputs: IdentityInputs { trees },
        source: Some(ImageSource {
            testbed: TESTBED.to_owned(),
            import_root: TESTBED.to_owned(),
            modules: j.classes.clone(),
            cache_tree: format!("src/{}", source::tree_name(&j.name, &j.version)),
            info: source::SourceInfo {
                package: j.name.clone(),
                version: j.version.clone(),
                kind: "debian-source".into(),
                file: format!("{}_{}.dsc", j.debian_source, j.debian_version),
                url: format!("{} {} (deb-src)", settings.mirror, b.suite),
                sha256: stamp
                    .files
                    .iter()
                    .find(|(f, _)| f.ends_with(".dsc"))
                    .map(|(_, h)| h.clone())
                    .unwrap_or_default(),
                size: 0,
                tree_sha256: stamp.tree_sha256.clone(),
                entries: stamp.entries,
            },
        }),
        built_at: now_rfc3339(),
        build_seconds: 0.0,
    };
    let _ = lines;
    manifest.identity = identity::identity(&manifest, &base_manifest.identity);
    manifest.build_seconds = started.elapsed().as_secs_f64();
    let id = commit(rt, c, &image, "flux", &manifest).await?;
    remove_replaced(rt, config, &image, &id).await;
    manifest.image_id = Some(id);
    write_manifest(config, &manifest)?;
    Ok((Action::Built, manifest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> JavaDef {
        JavaDef {
            name: "commons-lang3".into(),
            version: "3.12.0".into(),
            debian_source: "libcommons-lang3-java".into(),
            debian_version: "3.12.0-2+deb12u1".into(),
            base: "jdk17-bookworm".into(),
            classes: vec!["org.apache.commons.lang3.".into()],
            main_jars: vec![],
            test_jars: vec!["easymock".into()],
            exclude_tests: vec!["src/test/java/A Test.java".into()],
            release: Some(8),
            default: false,
            groups: vec![],
            timeout_s: None,
            namespace: "flux".into(),
        }
    }

    #[test]
    fn java_images_are_named_by_project_version_and_jdk() {
        let b = BaseDef {
            name: "jdk17-bookworm".into(),
            suite: "bookworm".into(),
            python: String::new(),
            java: Some("17".into()),
            interpreter: "/usr/lib/jvm/java-17-openjdk-amd64/bin/java".into(),
            packages: vec![],
            rootfs: "bookworm-jdk17".into(),
            default: false,
            namespace: "flux".into(),
        };
        assert_eq!(def().image(&b), "flux/commons-lang3:3.12.0-jdk17");
        assert!(def().check(&b).is_ok());
        let s = script(&def(), &b);
        assert!(s.contains("'src/test/java/A Test.java\n'"), "{s}");
        assert!(s.contains("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac"));
        assert!(s.contains("$JAVAC --release 8 -nowarn"), "{s}");
        let mut bad = def();
        bad.test_jars = vec!["../etc/x".into()];
        assert!(bad.check(&b).unwrap_err().contains("not a name"));
    }
}

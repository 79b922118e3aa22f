//! `flux gen`'s safety (issue 26.6): a spec error leaves an existing set byte for byte as it
//! was (it was rewritten empty: `index.json = []`), a second gen on a set fails at once naming
//! the first while a lock left by a killed gen blocks nothing, and SIGTERM removes the gen's
//! containers and scratch. Every set here is a copy in a temporary directory, never a
//! committed one.
use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "flux/sympy:1.13.3-py3.11";

/// A one-repository spec of SymPy's image; `extra` goes before `[[repository]]`.
fn spec(extra: &str, package: &str, modules: &str) -> String {
    format!(
        r#"
name = "safety"
seed = 3
{extra}
[[repository]]
name = "sympy"
package = "{package}"
image = "{IMAGE}"
interpreter = "/usr/bin/python3.11"
root = "/testbed"
code = ["sympy/"]
{modules}
split = "test"
"#
    )
}

const ONE_MODULE: &str = r#"modules = ["sympy/core/tests/test_facts.py"]"#;

/// A set as one on disk looks: spec, index, screened drops and an instance.
fn a_set(root: &Path, gen_toml: &str) -> PathBuf {
    let set = root.join("sets/safety");
    let inst = set.join("instances/sympy/sympy-m1-abc");
    std::fs::create_dir_all(&inst).unwrap();
    std::fs::write(set.join("gen.toml"), gen_toml).unwrap();
    std::fs::write(
        set.join("index.json"),
        "[\n  {\"id\": \"sympy-m1-abc\", \"repository\": \"sympy\"}\n]\n",
    )
    .unwrap();
    std::fs::write(set.join("screened.json"), "[]\n").unwrap();
    std::fs::write(inst.join("instance.toml"), "id = \"sympy-m1-abc\"\n").unwrap();
    std::fs::write(inst.join("oracle.json"), "{\"oracle_answer\": 1}\n").unwrap();
    set
}

/// Every file under `dir` (lock files aside: a gen may create one) and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                todo.push(p);
            } else if !name.ends_with(".lock") {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

fn gen(set: &Path, cache: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flux"))
        .arg("gen")
        .arg(set)
        .arg("--out")
        .arg(cache.join("out"))
        .env("FLUX_CACHE", cache)
        .output()
        .expect("run flux");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("flux gen {}: {}\n{err}", set.display(), out.status);
    (out.status.code(), err)
}

/// A process holding the set's lock as a gen does (flock(2) on `.gen.lock`), alone: killed,
/// nothing else holds it (flock(1) would leave its command holding it).
fn lock_holder(set: &Path) -> std::process::Child {
    Command::new(common::PY311)
        .args([
            "-c",
            "import fcntl, sys, time\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\ntime.sleep(600)",
        ])
        .arg(set.join(".gen.lock"))
        .spawn()
        .expect("python3.11")
}

/// Wait (at most 30 s) until someone holds `lock` (a probe with LOCK_NB fails).
fn wait_until_locked(lock: &Path) {
    use std::os::fd::AsRawFd;
    let t0 = Instant::now();
    loop {
        if let Ok(f) = std::fs::File::open(lock) {
            // SAFETY: flock on a descriptor owned here.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0 {
                return;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "nobody took {}",
            lock.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn image_missing() -> Option<String> {
    common::image_missing(IMAGE, "cargo xtask setup builds it")
}

/// `module_timeout_s = 0` ran every module into a timeout and wrote the set empty; a second
/// gen on a set ran every module again beside the first. Neither needs Docker now: both are
/// refused before anything runs, and the set stays byte-identical.
#[test]
fn a_spec_error_or_a_held_lock_leaves_the_set_byte_identical() {
    let tmp_dir = tempfile::tempdir().unwrap();
    let tmp = tmp_dir.path();
    let cache = tmp.join("cache");
    let set = a_set(
        tmp,
        &spec(
            "[budget]\nmodule_timeout_s = 0\n",
            "sympy==1.13.3",
            ONE_MODULE,
        ),
    );
    let before = snapshot(&set);
    let (code, err) = gen(&set, &cache);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("field `budget.module_timeout_s`"), "{err}");
    assert_eq!(snapshot(&set), before);

    // Another gen holds the set (as a running one does: flock on its lock file).
    std::fs::write(set.join("gen.toml"), spec("", "sympy==1.13.3", ONE_MODULE)).unwrap();
    let before = snapshot(&set);
    let mut holder = lock_holder(&set);
    wait_until_locked(&set.join(".gen.lock"));
    let (code, err) = gen(&set, &cache);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("set ") && err.contains("is being generated by another flux gen"),
        "{err}"
    );
    assert_eq!(snapshot(&set), before);
}

/// A wrong `package` pin made every module's runs fail the harvest's pin check, and a select
/// glob matching nothing made no module: both wrote the set empty (`index.json = []`). Now both
/// exit 2 naming the pin or the glob, before a test runs, and leave the set byte-identical. A
/// lock left by a SIGKILLed holder blocks nothing (the kernel released it).
#[test]
fn a_wrong_pin_or_an_empty_glob_leaves_the_set_byte_identical() {
    if let Some(why) = image_missing() {
        flux_skip::skip("flux gen's spec errors against an image", &why);
        return;
    }
    let tmp_dir = tempfile::tempdir().unwrap();
    let tmp = tmp_dir.path();
    let cache = tmp.join("cache");
    let set = a_set(tmp, &spec("", "sympy==9.9.9", ONE_MODULE));
    // A holder of the lock killed with SIGKILL: its lock must not block.
    let mut holder = lock_holder(&set);
    wait_until_locked(&set.join(".gen.lock"));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let before = snapshot(&set);
    let (code, err) = gen(&set, &cache);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("another flux gen"), "{err}");
    assert!(
        err.contains("sympy==9.9.9") && err.contains("sympy==1.13.3") && err.contains(IMAGE),
        "{err}"
    );
    assert_eq!(snapshot(&set), before);

    let glob = r#"select = { glob = "sympy/nowhere/test_*.py", count = 2 }"#;
    std::fs::write(set.join("gen.toml"), spec("", "sympy==1.13.3", glob)).unwrap();
    let before = snapshot(&set);
    let (code, err) = gen(&set, &cache);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("select glob `sympy/nowhere/test_*.py` matches no file"),
        "{err}"
    );
    assert_eq!(snapshot(&set), before);
}

/// Ids of containers (any state) this flux process made (label `flux.pid`).
fn containers_of(pid: u32) -> Vec<String> {
    let o = Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label=flux.pid={pid}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// SIGTERM (or SIGINT) ended a gen at once and left its running container and scratch
/// directories behind. Now its containers are removed, its scratch too, the set is left as it
/// was, and it exits 143 saying so.
#[test]
fn gen_killed_by_sigterm_leaves_no_container_or_scratch() {
    if common::skip("gen_killed_by_sigterm_leaves_no_container_or_scratch") {
        return;
    }
    if let Some(why) = image_missing() {
        flux_skip::skip("gen_killed_by_sigterm_leaves_no_container_or_scratch", &why);
        return;
    }
    let tmp_dir = tempfile::tempdir().unwrap();
    let tmp = tmp_dir.path();
    let cache = tmp.join("cache");
    let set = a_set(tmp, &spec("", "sympy==1.13.3", ONE_MODULE));
    let before = snapshot(&set);
    let mut flux = Command::new(env!("CARGO_BIN_EXE_flux"))
        .arg("gen")
        .arg(&set)
        .arg("--out")
        .arg(cache.join("out"))
        .env("FLUX_CACHE", &cache)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flux");
    let pid = flux.id();
    let t0 = Instant::now();
    while containers_of(pid).is_empty() {
        assert!(
            flux.try_wait().unwrap().is_none(),
            "flux gen ended before a container ran"
        );
        assert!(t0.elapsed() < Duration::from_secs(300), "no container ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    let scratch = cache.join("gen/scratch").join(format!("gen-{pid}"));
    let (status, err) = crate::harvest::signal_and_wait(&mut flux, libc::SIGTERM);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert_eq!(containers_of(pid), Vec::<String>::new(), "{err}");
    assert!(!scratch.exists(), "{} is left", scratch.display());
    assert_eq!(snapshot(&set), before);
    assert!(!set.join(".gen.new").exists());
}

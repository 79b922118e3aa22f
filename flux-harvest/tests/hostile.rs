//! Hostile tests: test code is hostile until proven otherwise (it runs third-party packages and
//! perturbed inputs while flux runs as root next to it). Real Docker, the real kernel, the
//! `flux/sympy:1.13.3-py3.11` image; each test skips loudly where those are missing.

use crate::common::*;
use flux_harvest::Status;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The files flux writes into a run directory after the test ran.
const OUTPUTS: &[&str] = &[
    "stdout.txt",
    "stderr.txt",
    "trace.jsonl",
    "trace-meta.json",
    "oracle.json",
    "callgraph.json",
    "replaced-oracle.json",
    "replaced-callgraph.json",
];

/// A Python test body (indented for `make`) that tries to plant, where the container sees its
/// run directory, a symbolic link named after each of flux's outputs to `targets[i]`, and a
/// hard link and a FIFO besides; it fails if it managed to plant anything.
fn planting_body(links: &[(&str, &Path)]) -> String {
    let pairs: Vec<String> = links
        .iter()
        .map(|(name, target)| format!("({name:?}, {:?})", target.display().to_string()))
        .collect();
    format!(
        "    import os\n\
         \x20   planted = []\n\
         \x20   for name, target in [{}]:\n\
         \x20       for how in ('symlink', 'link'):\n\
         \x20           p = os.path.join('/flux/run', name if how == 'symlink' else name + '.hard')\n\
         \x20           try:\n\
         \x20               getattr(os, how)(target, p)\n\
         \x20               planted.append(p)\n\
         \x20           except OSError as e:\n\
         \x20               print('refused', how, p, e.strerror)\n\
         \x20   try:\n\
         \x20       os.mkfifo('/flux/run/trace.jsonl.fifo')\n\
         \x20       planted.append('fifo')\n\
         \x20   except OSError as e:\n\
         \x20       print('refused fifo', e.strerror)\n\
         \x20   assert planted == [], planted\n\
         \x20   assert ibin(2, 4) == [0, 0, 1, 0]\n",
        pairs.join(", ")
    )
}

/// 17.6: the run directory was bind-mounted writable and owned by the container's user, and
/// flux wrote `stdout.txt`, `trace-meta.json`, `oracle.json`, … into it afterwards through
/// symlinks the test had planted: a test overwrote a root-owned host file and another
/// instance's `oracle.json`, and the harvest said "created". Now the container can create
/// nothing where flux writes: the planting is refused (the test passes only then), and the
/// host file, the other instance's gold files and the run's outputs are what they must be.
#[test]
fn planted_links_in_the_run_directory_never_lead_flux_outside_it() {
    if skip("planted_links_in_the_run_directory_never_lead_flux_outside_it") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A root-owned host file, readable by everyone (so a hard link is at least conceivable).
    let host_file = tmp.path().join("host-file.txt");
    std::fs::write(&host_file, "precious\n").unwrap();
    std::fs::set_permissions(&host_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Another instance with gold files of its own.
    let victim = make(
        tmp.path(),
        &Inst {
            id: "a-victim",
            ..Inst::default()
        },
    );
    let victim_oracle = victim.join("oracle.json");
    let victim_graph = victim.join("callgraph.json");
    std::fs::write(&victim_oracle, "the victim's gold answer\n").unwrap();
    std::fs::write(&victim_graph, "the victim's call graph\n").unwrap();
    let mut links: Vec<(&str, &Path)> = Vec::new();
    for name in OUTPUTS {
        let target = match *name {
            "oracle.json" | "replaced-oracle.json" => victim_oracle.as_path(),
            "callgraph.json" | "replaced-callgraph.json" => victim_graph.as_path(),
            _ => host_file.as_path(),
        };
        links.push((name, target));
    }
    let body = planting_body(&links);
    let hostile = make(
        tmp.path(),
        &Inst {
            id: "b-hostile",
            test_body: &body,
            tracing_extra: "scope = \"tests\"\n",
            ..Inst::default()
        },
    );
    let r = run(std::slice::from_ref(&hostile), &opts());
    let i = &r.instances[0];
    let run_dir = i.run_dir.clone().expect("a run was made");
    let stdout = std::fs::read_to_string(run_dir.join("stdout.txt")).unwrap_or_default();

    assert_eq!(std::fs::read_to_string(&host_file).unwrap(), "precious\n");
    assert_eq!(
        std::fs::read_to_string(&victim_oracle).unwrap(),
        "the victim's gold answer\n"
    );
    assert_eq!(
        std::fs::read_to_string(&victim_graph).unwrap(),
        "the victim's call graph\n"
    );
    assert_eq!(i.status, Status::Created, "{:?}\n{stdout}", i.error);
    assert_eq!(
        read_json(&hostile.join("oracle.json"))["oracle_answer"],
        expected_answer()
    );
    for name in OUTPUTS {
        let p = run_dir.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            assert!(m.is_file(), "{} is not a regular file", p.display());
            use std::os::unix::fs::MetadataExt;
            assert_eq!(m.nlink(), 1, "{} has other links", p.display());
        }
    }
}

/// Host runs (`--runtime host`, Docker absent) ran the test as root, next to flux, with its
/// logs written by the test's own shell into the run directory. When flux is root the test now
/// runs as nobody: this one passes only if it is not root, and it cannot write the run
/// directory.
#[test]
fn host_runs_run_the_test_as_nobody() {
    if skip("host_runs_run_the_test_as_nobody") {
        return;
    }
    // SAFETY: trivial syscall.
    if unsafe { libc::geteuid() } != 0 {
        flux_skip::skip("host_runs_run_the_test_as_nobody", "flux is not root here");
        return;
    }
    if !Path::new("/usr/bin/python3.11").exists() {
        flux_skip::skip("host_runs_run_the_test_as_nobody", "no /usr/bin/python3.11");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = make(
        tmp.path(),
        &Inst {
            id: "host-as-nobody",
            test_body: "    import os\n    assert os.getuid() == 65534, os.getuid()\n    \
                        assert not os.access('.', os.W_OK)\n    \
                        assert ibin(2, 4) == [0, 0, 1, 0]\n",
            tracing_extra: "scope = \"tests\"\n",
            ..Inst::default()
        },
    );
    let mut o = opts();
    o.runtime = flux_harvest::Runtime::Host;
    let r = run(std::slice::from_ref(&dir), &o);
    let i = &r.instances[0];
    assert_eq!(i.status, Status::Created, "{:?}", i.error);
    assert!(
        i.labels.iter().any(|l| l == "not reproducible"),
        "{:?}",
        i.labels
    );
    assert_eq!(
        read_json(&dir.join("oracle.json"))["oracle_answer"],
        expected_answer()
    );
}

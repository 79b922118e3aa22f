//! End to end on a real starter instance: perturb `sympy-factorint-small-path`, re-harvest the
//! variants in the `flux/sympy:1.13.3-py3.11` image under the real tracer, keep at least one
//! variant whose gold answer differs from the origin's, and reproduce it with a `--check`
//! harvest (the library path of `flux harvest --check`; also the `flux` binary when `FLUX_BIN`
//! names one).
//!
//! Needs root (eBPF), a Docker daemon and the image (`cargo xtask images sympy`); otherwise it
//! says `skipping: …` and returns. Slow: every variant is a traced container run.
use flux_harvest::{HarvestOptions, Runtime, Status};
use flux_perturb::{PerturbOptions, VariantStatus};
use std::path::{Path, PathBuf};

const IMAGE: &str = "flux/sympy:1.13.3-py3.11";
const ORIGIN: &str = "sympy-factorint-small-path";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        return Some("needs root (eBPF)".into());
    }
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", IMAGE])
        .output();
    match out {
        Err(e) => Some(format!("docker CLI not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "docker or image {IMAGE} unavailable: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn perturbs_reharvests_keeps_a_changed_variant_that_check_reproduces() {
    if let Some(why) = skip_reason() {
        flux_skip::skip(
            "perturbs_reharvests_keeps_a_changed_variant_that_check_reproduces",
            &why,
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("instances/sympy").join(ORIGIN);
    copy_dir(&workspace().join("instances/sympy").join(ORIGIN), &origin);
    let had_oracle = origin.join("oracle.json").exists();
    let mut h = HarvestOptions::new(workspace().join(".flux-cache"));
    h.runtime = Runtime::Docker;
    let mut opts = PerturbOptions::new(Some(h.clone()));
    // Seeds in rounds of 2 until one variant is kept, 4 at most.
    opts.n = 4;
    opts.keep = Some(1);
    opts.seed = 1;
    opts.check = false; // checked below, explicitly
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = match rt.block_on(flux_perturb::perturb(
        std::slice::from_ref(&origin),
        &opts,
        &mut |l: &str| eprintln!("{l}"),
    )) {
        Ok(r) => r,
        Err(e) if format!("{e:#}").contains("cannot trace here") => {
            flux_skip::skip("perturbs_reharvests…", &format!("cannot trace here: {e:#}"));
            return;
        }
        Err(e) => panic!("{e:#}"),
    };
    eprintln!("{}", report.to_text());
    let inst = &report.instances[0];
    assert!(inst.error.is_none(), "{:?}", inst.error);
    assert!(
        inst.attempted == 2 || inst.attempted == 4,
        "{}",
        report.to_text()
    );
    assert_eq!(
        inst.origin_oracle.as_deref(),
        Some(if had_oracle { "stored" } else { "harvested" })
    );
    // the origin is never written
    assert_eq!(origin.join("oracle.json").exists(), had_oracle);
    let kept: Vec<_> = inst
        .variants
        .iter()
        .filter(|v| v.status == VariantStatus::Kept)
        .collect();
    assert!(!kept.is_empty(), "no variant kept:\n{}", report.to_text());
    // No round after the one that kept a variant.
    let first = kept.iter().map(|v| v.seed).min().unwrap();
    assert_eq!(
        inst.attempted as u64,
        first.div_ceil(2) * 2,
        "{}",
        report.to_text()
    );
    for v in &inst.variants {
        match v.status {
            VariantStatus::Kept => {}
            _ => {
                assert!(v.reason.is_some() && v.reason_kind.is_some(), "{v:?}");
                assert!(
                    !tmp.path().join("instances/sympy").join(&v.id).exists(),
                    "discarded {} left behind",
                    v.id
                );
            }
        }
    }
    // the staging directory is gone
    assert!(!tmp.path().join("instances/.flux-perturb-staging").exists());
    let origin_answer = if had_oracle {
        flux_instance::read_oracle(&origin).unwrap().oracle_answer
    } else {
        // harvest the origin here (a copy elsewhere) to compare with
        let o2 = tmp.path().join("origin-copy/sympy").join(ORIGIN);
        copy_dir(&origin, &o2);
        let r = flux_harvest::harvest_blocking(std::slice::from_ref(&o2), &h, &mut |_| {}).unwrap();
        assert!(r.ok(), "{:?}", r.instances[0].error);
        flux_instance::read_oracle(&o2).unwrap().oracle_answer
    };
    for v in &kept {
        let dir = v.dir.clone().unwrap();
        assert_eq!(dir, tmp.path().join("instances/sympy").join(&v.id));
        let inst = flux_instance::load_instance(&dir).unwrap();
        let var = inst.spec.variant.clone().unwrap();
        assert_eq!(var.origin, ORIGIN);
        assert_eq!(var.seed, v.seed);
        let answer = flux_instance::read_oracle(&dir).unwrap().oracle_answer;
        assert_ne!(answer, origin_answer, "{}", v.id);
        assert!(flux_perturb::answer_change(&answer, &origin_answer, &[]).is_some());
        // reproduce it from a clean run
        let mut c = h.clone();
        c.check = true;
        let r =
            flux_harvest::harvest_blocking(std::slice::from_ref(&dir), &c, &mut |_| {}).unwrap();
        assert_eq!(
            r.instances[0].status,
            Status::Reproduced,
            "{:?}",
            r.instances[0].error
        );
        if let Some(bin) = std::env::var_os("FLUX_BIN") {
            let out = std::process::Command::new(bin)
                .args(["harvest", "--check", "--runtime", "docker", "--cache"])
                .arg(workspace().join(".flux-cache"))
                .arg(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "flux harvest --check: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

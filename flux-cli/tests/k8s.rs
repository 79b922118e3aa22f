//! The fleet on Kubernetes (issue 26.5): `deploy/k8s/flux-gen.yaml` validates against
//! Kubernetes' own schemas, and its Jobs run here as Kubernetes would run them: each index of
//! the Indexed Job (init container `flux images load`, then `flux gen --shard`) and then the
//! merge Job, every container started by Docker from the manifest's own image build, command,
//! environment (`JOB_COMPLETION_INDEX` added), mounts, user, capabilities and host PID
//! namespace. The merged set must hold the sample's instances with their gold.
//!
//! What differs from a cluster, and only this: the PersistentVolumeClaim is a temporary
//! directory; the hostPath `/var/lib/flux` (mounted at the same path, which the test checks) is
//! a temporary directory at one path on both sides, standing for a fresh node; the set's name,
//! shard count and completions are the sample's; and where the Docker daemon predates the
//! capability names `BPF` and `PERFMON` (Docker 20.10, this machine's) `SYS_ADMIN` is granted
//! in their place, with a note on stderr.
//!
//! The manifests are read with PyYAML and checked with `kubernetes-validate` from the Python
//! environment `cargo xtask setup` makes; without it, root, eBPF or the images, the tests skip
//! loudly.

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const MANIFEST: &str = "deploy/k8s/flux-gen.yaml";
const IMAGE: &str = "flux/sympy:1.13.3-py3.11";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The manifest's documents, as JSON.
fn documents(py: &Path) -> Vec<Value> {
    let out = Command::new(py)
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(workspace().join(MANIFEST))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn job<'a>(docs: &'a [Value], name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{MANIFEST} has no Job {name}"))
}

fn env_of<'a>(c: &'a Value, name: &str) -> Option<&'a str> {
    c["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str()
}

#[test]
fn the_k8s_manifests_validate_against_kubernetes_schemas() {
    let what = "k8s manifests";
    let Some(py) = common::hub_python(what, &["yaml", "kubernetes_validate"]) else {
        return;
    };
    let out = Command::new(&py)
        .args(["-m", "kubernetes_validate", "--strict", "-k", "1.33.0"])
        .arg(workspace().join(MANIFEST))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // What the schema cannot see: the shard count the command uses is the Job's completions,
    // every pod runs as the manifest's privileges say, and the same-path mounts are so.
    let docs = documents(&py);
    let shards = job(&docs, "flux-gen-shards");
    let spec = &shards["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let pod = &spec["template"]["spec"];
    let gen = &pod["containers"][0];
    let n = env_of(gen, "SHARDS").expect("SHARDS");
    assert_eq!(spec["completions"].to_string(), n, "SHARDS = completions");
    for job_name in ["flux-gen-shards", "flux-gen-merge"] {
        let pod = &job(&docs, job_name)["spec"]["template"]["spec"];
        for c in containers(pod) {
            assert_eq!(
                c["securityContext"]["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{job_name}/{}",
                c["name"]
            );
            assert_eq!(env_of(c, "FLUX_SET"), env_of(gen, "FLUX_SET"));
        }
        for (host, inside) in mounts(pod, containers(pod)[0]) {
            if let Mount::Host(h) = host {
                if h != "/var/run/docker.sock" {
                    assert_eq!(h, inside, "{job_name}: a hostPath at the same path");
                }
            }
        }
    }
}

enum Mount {
    Host(String),
    Claim,
}

fn containers(pod: &Value) -> Vec<&Value> {
    let mut v: Vec<&Value> = pod["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    v.extend(pod["containers"].as_array().into_iter().flatten());
    v
}

/// A container's mounts: what each volume is, and where it is mounted.
fn mounts(pod: &Value, c: &Value) -> Vec<(Mount, String)> {
    let volumes = pod["volumes"].as_array().unwrap();
    c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let v = volumes
                .iter()
                .find(|v| v["name"] == m["name"])
                .unwrap_or_else(|| panic!("no volume {}", m["name"]));
            let what = match v["hostPath"]["path"].as_str() {
                Some(p) => Mount::Host(p.to_string()),
                None => {
                    assert!(v["persistentVolumeClaim"].is_object(), "{v}");
                    Mount::Claim
                }
            };
            (what, m["mountPath"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Where this machine's Docker keeps its images and whether it knows `CAP_BPF`.
fn docker_facts() -> Option<(String, bool)> {
    let root = Command::new("docker")
        .args(["info", "--format", "{{.DockerRootDir}}"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let knows_bpf = Command::new("docker")
        .args(["run", "--rm", "--cap-add", "BPF", IMAGE, "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    Some((
        String::from_utf8_lossy(&root.stdout).trim().to_string(),
        knows_bpf,
    ))
}

/// What a pod's container does, as `docker run` arguments.
struct Pod<'a> {
    image: &'a str,
    node_root: &'a Path,
    shared: &'a Path,
    docker_root: &'a str,
    knows_bpf: bool,
    env: Vec<(String, String)>,
}

impl Pod<'_> {
    fn run(&self, pod: &Value, c: &Value) -> std::process::Output {
        let mut a: Vec<String> = vec!["run".into(), "--rm".into()];
        if pod["hostPID"] == true {
            a.push("--pid=host".into());
        }
        let sc = &c["securityContext"];
        if let Some(u) = sc["runAsUser"].as_u64() {
            a.push(format!("--user={u}"));
        }
        if sc["allowPrivilegeEscalation"] == false {
            a.push("--security-opt=no-new-privileges".into());
        }
        for cap in sc["capabilities"]["drop"].as_array().into_iter().flatten() {
            a.push(format!("--cap-drop={}", cap.as_str().unwrap()));
        }
        for cap in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            let cap = cap.as_str().unwrap();
            let cap = match cap {
                "BPF" | "PERFMON" if !self.knows_bpf => {
                    eprintln!("k8s: this Docker does not know CAP_{cap}: SYS_ADMIN in its place");
                    "SYS_ADMIN"
                }
                c => c,
            };
            a.push(format!("--cap-add={cap}"));
        }
        for e in c["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap();
            let value = self
                .env
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| self.node_path(e["value"].as_str().unwrap()));
            a.push(format!("--env={name}={value}"));
        }
        for (n, v) in &self.env {
            if n == "JOB_COMPLETION_INDEX" {
                a.push(format!("--env={n}={v}"));
            }
        }
        for (what, inside) in mounts(pod, c) {
            let ro = c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["mountPath"] == inside.as_str() && m["readOnly"] == true);
            let (host, inside) = match what {
                Mount::Claim => (self.shared.to_path_buf(), inside),
                Mount::Host(h) if h == "/var/lib/docker" => (self.docker_root.into(), h),
                Mount::Host(h) if h == "/var/run/docker.sock" => (h.clone().into(), inside),
                Mount::Host(h) => {
                    assert_eq!(h, inside, "a hostPath mounted at the same path");
                    let p = self.node_path(&h);
                    (PathBuf::from(&p), p)
                }
            };
            let ro = if ro { ":ro" } else { "" };
            a.push(format!("--volume={}:{inside}{ro}", host.display()));
        }
        a.push(self.image.into());
        a.extend(
            c["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string()),
        );
        let out = Command::new("docker").args(&a).output().unwrap();
        eprintln!(
            "k8s: docker {}: {}\n{}",
            a.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `/var/lib/flux/...` on the node is the test's node directory.
    fn node_path(&self, p: &str) -> String {
        match p.strip_prefix("/var/lib/flux") {
            Some(rest) => format!("{}{rest}", self.node_root.display()),
            None => p.to_string(),
        }
    }
}

#[test]
fn the_job_runs_as_its_manifest_says_and_merges() {
    let what = "the k8s Job run locally";
    if common::skip(what) {
        return;
    }
    let Some(py) = common::hub_python(what, &["yaml"]) else {
        return;
    };
    if let Some(why) = crate::gen::image_missing() {
        flux_skip::skip(what, &why);
        return;
    }
    let Some((docker_root, knows_bpf)) = docker_facts() else {
        flux_skip::skip(
            what,
            &format!("docker does not answer or {IMAGE} is missing"),
        );
        return;
    };
    let docs = documents(&py);
    let tmp = common::tempdir();
    let (shared, node_root) = (tmp.join("shared"), tmp.join("node"));
    std::fs::create_dir_all(shared.join("sets/ci-sample")).unwrap();
    std::fs::create_dir_all(&node_root).unwrap();
    std::fs::write(shared.join("sets/ci-sample/gen.toml"), crate::gen::SPEC).unwrap();

    // The node image, built as deploy/k8s/Dockerfile says (no registry).
    let node_image = format!("fluxtest/node:k8s-{}", std::process::id());
    let ctx = tmp.join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_flux"), ctx.join("flux")).unwrap();
    std::fs::copy(
        workspace().join("deploy/k8s/Dockerfile"),
        ctx.join("Dockerfile"),
    )
    .unwrap();
    let built = Command::new("docker")
        .args(["build", "-q", "-t", &node_image])
        .arg(&ctx)
        .env("DOCKER_BUILDKIT", "0")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    // Where the images were built, once: saved to the shared volume for the nodes to load.
    let cache = workspace().join(".flux-cache");
    let saved = Command::new(env!("CARGO_BIN_EXE_flux"))
        .args(["images", "save", "--to"])
        .arg(shared.join("images"))
        .arg(IMAGE)
        .env("FLUX_CACHE", &cache)
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        saved.status.success(),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );

    let shards = job(&docs, "flux-gen-shards");
    let n = 2;
    let mut env = vec![
        ("FLUX_SET".to_string(), "ci-sample".to_string()),
        ("SHARDS".to_string(), n.to_string()),
    ];
    let pod = &shards["spec"]["template"]["spec"];
    for index in 0..n {
        env.retain(|(k, _)| k != "JOB_COMPLETION_INDEX");
        env.push(("JOB_COMPLETION_INDEX".into(), index.to_string()));
        let p = Pod {
            image: &node_image,
            node_root: &node_root,
            shared: &shared,
            docker_root: &docker_root,
            knows_bpf,
            env: env.clone(),
        };
        for c in containers(pod) {
            let out = p.run(pod, c);
            assert!(out.status.success(), "index {index}: {}", c["name"]);
        }
    }
    assert!(
        !shared.join("sets/ci-sample/instances").exists(),
        "shards do not write the set"
    );
    // The init container loaded the images into the fresh node's cache.
    assert!(node_root.join("cache/images").is_dir());

    let merge = job(&docs, "flux-gen-merge");
    let pod = &merge["spec"]["template"]["spec"];
    env.retain(|(k, _)| k != "JOB_COMPLETION_INDEX");
    let p = Pod {
        image: &node_image,
        node_root: &node_root,
        shared: &shared,
        docker_root: &docker_root,
        knows_bpf,
        env,
    };
    for c in containers(pod) {
        assert!(p.run(pod, c).status.success(), "merge: {}", c["name"]);
    }
    let set = shared.join("sets/ci-sample");
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(set.join("index.json")).unwrap()).unwrap();
    assert!(index.len() >= 8, "only {} instances", index.len());
    for r in &index {
        let d = set.join("instances/sympy").join(r["id"].as_str().unwrap());
        let oracle = flux_instance::read_oracle(&d).unwrap();
        assert!(
            oracle.provenance.image_identity.starts_with("flux-id:"),
            "{}",
            d.display()
        );
    }
    let _ = Command::new("docker")
        .args(["rmi", "-f", &node_image])
        .output();
    let _ = std::fs::remove_dir_all(&tmp);
}

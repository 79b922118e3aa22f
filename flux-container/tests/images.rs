//! Image builds against the real Docker daemon and package index: the smallest repository of
//! `images/images.toml` (more-itertools) built twice from scratch under a namespace of its own
//! (`fluxtest/…`, so the shared `flux/` images are never touched), then checked: same content
//! identity though Docker's ids differ, the source tree at /testbed is the cache's tree and is
//! what the package imports, read-only, and the repository's own test suite passes offline.
//!
//! Needs root (the base's rootfs is debootstrapped when missing), a Docker daemon and the
//! package index; otherwise it skips through flux-skip (a failure under `FLUX_REQUIRE_ALL=1`).

use std::path::{Path, PathBuf};

use flux_container::images::{self, source, suite, Action, BuildConfig, Definitions, Target};
use flux_container::{ContainerSpec, Runtime};

const NS: &str = "fluxtest";
const REPO: &str = "more-itertools";
/// What skips where the machine cannot build images.
const WHAT: &str = "image builds against Docker";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

async fn runtime() -> Option<Runtime> {
    // SAFETY: a plain syscall without arguments.
    if unsafe { libc::geteuid() } != 0 {
        flux_skip::skip(WHAT, "not root (building a base may debootstrap)");
        return None;
    }
    let socket = flux_container::runtime::default_socket();
    if !Path::new(&socket).exists() {
        flux_skip::skip(
            WHAT,
            &format!("no Docker socket at {socket} (start dockerd)"),
        );
        return None;
    }
    match Runtime::connect().await {
        Ok(rt) => Some(rt),
        Err(e) => {
            flux_skip::skip(WHAT, &e.to_string());
            None
        }
    }
}

/// The project's more-itertools definition and its base, in namespace `fluxtest`.
fn definitions(dir: &Path) -> PathBuf {
    let project = workspace_root().join("images/images.toml");
    let mut defs = Definitions::load(&project).unwrap();
    let repo = defs
        .repos
        .iter()
        .find(|r| r.name == REPO)
        .expect("more-itertools is defined")
        .clone();
    defs.bases.retain(|b| b.name == repo.base);
    defs.repos = vec![repo];
    defs.javas.clear();
    defs.settings.namespace = NS.into();
    let path = dir.join("images.toml");
    std::fs::write(&path, toml::to_string(&defs).unwrap()).unwrap();
    path
}

async fn remove_images(rt: &Runtime, images: &[String]) {
    use bollard::query_parameters::RemoveImageOptionsBuilder;
    for image in images {
        let options = RemoveImageOptionsBuilder::default().force(true).build();
        let _ = rt.docker().remove_image(image, Some(options), None).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_survives_a_rebuild_and_the_image_imports_its_testbed() {
    let Some(rt) = runtime().await else { return };
    let tmp = tempfile::tempdir().unwrap();
    let config = BuildConfig {
        definitions: definitions(tmp.path()),
        // The project's cache: wheelhouse and source tree are shared; manifests are per name.
        cache_dir: workspace_root().join(".flux-cache"),
        rebuild: true,
    };
    let defs = Definitions::load(&config.definitions).unwrap();
    let targets = defs.all();
    let names: Vec<String> = targets.iter().map(Target::image).collect();
    assert_eq!(
        names,
        [
            format!("{NS}/base:py3.11-bookworm"),
            format!("{NS}/{REPO}:11.2.1-py3.11")
        ]
    );
    remove_images(&rt, &names).await;
    let mut built = Vec::new();
    for round in 0..2 {
        let results = images::build_with(&rt, &config, &defs, &[REPO.into()], &mut |l| {
            eprintln!("build {round}: {l}")
        })
        .await
        .unwrap();
        let reports: Vec<_> = results
            .into_iter()
            .map(|(image, r)| r.unwrap_or_else(|e| panic!("{image}: {e}")))
            .collect();
        assert!(reports.iter().all(|r| r.action == Action::Built));
        built.push(reports);
    }
    for (a, b) in built[0].iter().zip(&built[1]) {
        assert_ne!(
            a.manifest.image_id, b.manifest.image_id,
            "{}: not rebuilt",
            a.image
        );
        assert!(a.manifest.identity.starts_with("flux-id:"), "{}", a.image);
        assert_eq!(
            a.manifest.identity, b.manifest.identity,
            "{}: identity changed across a rebuild:\n{:#?}\n{:#?}",
            a.image, a.manifest.identity_inputs, b.manifest.identity_inputs
        );
    }
    let m = &built[1][1].manifest;
    let label = images::image_manifest(&rt, &m.image)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(label.identity, m.identity, "the image carries its identity");

    // The source: the cache's tree, unpacked from the sdist, is /testbed byte for byte.
    let src = m.source.as_ref().expect("a repo image has a source");
    assert_eq!(src.info.kind, "sdist");
    assert_eq!(src.import_root, "/testbed");
    assert_eq!(src.modules, ["more_itertools"]);
    let tree = config.cache_dir.join(&src.cache_tree);
    assert_eq!(
        tree,
        source::tree_dir(&config.cache_dir, REPO, "11.2.1"),
        "where flux eval looks"
    );
    let (digest, _) = source::tree_digest(&tree).unwrap();
    assert_eq!(digest, src.info.tree_sha256);
    let in_image = m.identity_inputs.trees["/testbed"].as_ref().unwrap();
    assert_eq!(in_image.sha256, digest);
    assert!(
        tree.join("tests/test_more.py").is_file(),
        "the sdist's tests"
    );

    // The package imports from /testbed, which test code (uid 1000) cannot write.
    let run_dir = tempfile::tempdir().unwrap();
    let spec = ContainerSpec::new(
        &m.image,
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "/usr/bin/python3.11 -c 'import more_itertools; print(more_itertools.__file__)'; \
             touch /testbed/x 2>/dev/null && echo writable || echo read-only"
                .into(),
        ],
        run_dir.path(),
    );
    let out = rt.run(spec).await.unwrap();
    assert_eq!(
        out.stdout_lossy(),
        "/testbed/more_itertools/__init__.py\nread-only\n",
        "{}",
        out.stderr_lossy()
    );

    // Its own test suite runs offline in the image.
    let Target::Repo(r, b) = &targets[1] else {
        unreachable!()
    };
    let (report, path) = suite::run(&rt, &config, r, b, &mut |l| eprintln!("suite: {l}"))
        .await
        .unwrap();
    assert!(path.is_file());
    assert_eq!(report.identity, m.identity);
    assert_eq!(report.modules_collected, 2, "{report:#?}");
    assert_eq!(report.modules_passing, 2, "{:#?}", report.modules);
    assert!(report.tests_collected > 500 && report.tests_failed == 0);

    save_and_load_on_a_machine_without_the_image(&rt, &config, m).await;
    remove_images(&rt, &names).await;
}

/// `flux images save/load` (a fleet's nodes share built images): the repository image saved,
/// removed from Docker, a damaged index refused before Docker sees a byte, then loaded into a
/// fresh cache: the same Docker id, its manifest in that cache, and it runs.
async fn save_and_load_on_a_machine_without_the_image(
    rt: &Runtime,
    config: &BuildConfig,
    m: &images::Manifest,
) {
    use images::archive;
    let dir = tempfile::tempdir().unwrap();
    let image = vec![m.image.clone()];
    let saved = archive::save(rt, &config.cache_dir, &image, dir.path(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(saved.len(), 1);
    assert!(!saved[0].skipped && saved[0].bytes > 1_000_000, "{saved:?}");
    let again = archive::save(rt, &config.cache_dir, &image, dir.path(), &mut |_| {})
        .await
        .unwrap();
    assert!(again[0].skipped, "the same identity is not written twice");
    let (tar, json) = archive::files_of(dir.path(), &m.identity).unwrap();
    assert!(tar.is_file() && json.is_file());

    remove_images(rt, &image).await;
    assert_eq!(rt.image_id(&m.image).await.unwrap(), None);

    // A damaged archive (here: the index's digest no longer its file's) is refused by name.
    let index_path = dir.path().join("index.json");
    let good = std::fs::read_to_string(&index_path).unwrap();
    let entry = archive::read_index(dir.path()).unwrap().images[0].clone();
    std::fs::write(&index_path, good.replace(&entry.sha256, &"0".repeat(64))).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let err = archive::load(rt, cache.path(), dir.path(), &mut |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&entry.file) && err.contains("damaged"),
        "{err}"
    );
    assert_eq!(rt.image_id(&m.image).await.unwrap(), None, "nothing loaded");
    std::fs::write(&index_path, good).unwrap();

    let loaded = archive::load(rt, cache.path(), dir.path(), &mut |_| {})
        .await
        .unwrap();
    assert!(!loaded[0].skipped);
    assert_eq!(rt.image_id(&m.image).await.unwrap(), m.image_id);
    let there = images::Manifest::load(&images::manifest_path(cache.path(), &m.image)).unwrap();
    assert_eq!(there.identity, m.identity);
    let run_dir = tempfile::tempdir().unwrap();
    let spec = ContainerSpec::new(
        &m.image,
        vec![
            "/usr/bin/python3.11".into(),
            "-c".into(),
            "import more_itertools; print(more_itertools.__name__)".into(),
        ],
        run_dir.path(),
    );
    let out = rt.run(spec).await.unwrap();
    assert_eq!(
        out.stdout_lossy(),
        "more_itertools\n",
        "{}",
        out.stderr_lossy()
    );
}

//! The JVM witness: a fixture program (`tests/programs/java/fluxfixture/Main.java`) counts
//! every activation of its own methods (recursion, interface dispatch, an exception two frames
//! below its handler, a second thread, a lambda and a method reference); a trace of it through
//! HotSpot's method probes must give exactly those counts, interpreted (`-Xint`) and with the
//! JIT compiling the hot methods partway (checked with `-XX:+PrintCompilation`), every entry
//! with its return, and the calls nested as the program makes them.
use flux_agent::interp::{Family, Interpreter};
use flux_agent::run::{trace_jvm_host, JvmOptions};
use flux_agent::tracer::TracerOptions;
use flux_trace::{Kind, Trace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const JAVA: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";
const JAVAC: &str = "/usr/lib/jvm/java-17-openjdk-amd64/bin/javac";

/// The fixture compiled into a fresh directory.
fn compile() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flux-jvm-witness-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/java/fluxfixture/Main.java");
    let st = std::process::Command::new(JAVAC)
        .arg("-d")
        .arg(dir.join("classes"))
        .arg(src)
        .status()
        .unwrap();
    assert!(st.success(), "javac failed");
    dir
}

/// `COUNT fluxfixture.Main.fib 354000` lines, as `Main.fib` → 354000.
fn program_counts(out: &str) -> BTreeMap<String, u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("COUNT fluxfixture."))
        .map(|l| {
            let (name, n) = l.rsplit_once(' ').unwrap();
            (name.to_string(), n.parse().unwrap())
        })
        .collect()
}

fn trace_counts(t: &Trace, kind: Kind) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for e in t.events.iter().filter(|e| e.ev == kind) {
        *m.entry(e.qualname().to_string()).or_insert(0) += 1;
    }
    m
}

/// Trace the fixture with `jvm_args`; the trace and the program's stdout.
async fn run(dir: &Path, interp: &Interpreter, jvm_args: &str) -> (Trace, String) {
    let out = dir.join(format!("out{}.txt", jvm_args.len()));
    let cmd = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        format!(
            "exec {JAVA} {jvm_args} -cp {} fluxfixture.Main 1000 > {}",
            dir.join("classes").display(),
            out.display()
        ),
    ];
    let topts = TracerOptions {
        classes: vec!["fluxfixture.".into()],
        ..TracerOptions::default()
    };
    let t = trace_jvm_host(&cmd, interp, &topts, &JvmOptions::default())
        .await
        .expect("tracing the fixture");
    assert_eq!(t.exit_code, 0, "the fixture failed");
    (t.trace, std::fs::read_to_string(out).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jvm_call_counts_are_exact_interpreted_and_jit_compiled() {
    if let Err(why) = flux_agent::tracer::can_trace() {
        flux_skip::skip("jvm witness", &why);
        return;
    }
    if !Path::new(JAVAC).exists() {
        flux_skip::skip(
            "jvm witness",
            "no JDK 17 (apt-get install openjdk-17-jdk-headless)",
        );
        return;
    }
    let interp = Interpreter::inspect(Path::new(JAVA), Path::new("/")).unwrap();
    assert_eq!(
        interp.family,
        Family::HotSpot,
        "decided from libjvm.so's notes"
    );
    let dir = compile();
    for mode in ["-Xint", "-XX:+PrintCompilation"] {
        let (t, out) = run(&dir, &interp, mode).await;
        assert!(t.meta.complete, "{mode}: {:?}", t.meta.problems);
        let want = program_counts(&out);
        assert_eq!(
            want.len(),
            18,
            "{mode}: the fixture printed its counts: {out}"
        );
        let calls = trace_counts(&t, Kind::Call);
        assert_eq!(calls, want, "{mode}: calls per method, trace vs program");
        assert_eq!(trace_counts(&t, Kind::Return), want, "{mode}: returns");
        if mode.contains("PrintCompilation") {
            // The JIT compiled the hot methods while they ran (tier 3: C1, tier 4: C2).
            assert!(
                out.lines().any(|l| l.contains("fluxfixture.Main::fib")),
                "fib was never compiled"
            );
        }
        // Nesting: the lambda is called by applyAll (through the JDK's proxy, left out), the
        // worker's methods run on a thread of their own, level3 is called by level2.
        let by_act: BTreeMap<u64, &flux_trace::Event> = t
            .events
            .iter()
            .filter(|e| e.ev == Kind::Call)
            .map(|e| (e.activation, e))
            .collect();
        let parent_of = |name: &str| -> Vec<&str> {
            let mut v: Vec<&str> = by_act
                .values()
                .filter(|e| e.qualname() == name)
                .map(|e| by_act.get(&e.parent).map_or("", |p| p.qualname().as_str()))
                .collect();
            v.dedup();
            v
        };
        assert_eq!(parent_of("Main.lambda$main$0"), ["Main.applyAll"], "{mode}");
        assert_eq!(parent_of("Main.twice"), ["Main.lambda$main$0"], "{mode}");
        assert_eq!(parent_of("Main.square"), ["Main.applyAll"], "{mode}");
        assert_eq!(parent_of("Main.level3"), ["Main.level2"], "{mode}");
        assert_eq!(parent_of("Circle.area"), ["Main.sumAreas"], "{mode}");
        let tid = |name: &str| by_act.values().find(|e| e.qualname() == name).unwrap().tid;
        assert_ne!(
            tid("Worker.work"),
            tid("Main.main"),
            "{mode}: a second thread"
        );
        assert!(t.meta.counts["jvm.hidden_frames_dropped"] > 0, "{mode}");
        let sig = by_act
            .values()
            .find(|e| e.qualname() == "Main.fib")
            .unwrap()
            .sig();
        assert_eq!(sig.as_str(), "(I)I");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

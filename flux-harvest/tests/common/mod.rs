//! Helpers the harvest's integration tests share: the sympy ibin instance written into a temp
//! dir, options for Docker, skipping loudly where the machine cannot trace or lacks the image.
use flux_harvest::{harvest_blocking, HarvestOptions, InstanceReport, Report, Runtime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub const IMAGE: &str = "flux/sympy:1.13.3-py3.11";

pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.flux-cache")
}

pub fn docker_has(image: &str) -> Result<bool, String> {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output()
        .map_err(|e| format!("docker CLI not runnable: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("No such image") {
            return Ok(false);
        }
        return Err(format!("docker does not answer: {}", err.trim()));
    }
    Ok(true)
}

pub fn skip(what: &str) -> bool {
    if let Err(why) = flux_agent::tracer::can_trace() {
        return flux_skip::skip(what, &why.to_string());
    }
    match docker_has(IMAGE) {
        Ok(true) => false,
        Ok(false) => flux_skip::skip(
            what,
            &format!("image {IMAGE} is missing (flux images build {IMAGE})"),
        ),
        Err(why) => flux_skip::skip(what, &why),
    }
}

/// `ibin(2, 4)` in sympy 1.13.3 (`sympy/utilities/iterables.py`, def at line 310):
///   354 `if n < 0:` false; 356 `n = as_int(n)`; 358 `if bits is None:` false → else:
///   361 `try:`; 362 `bits = as_int(bits)` succeeds → the try's else: 366 `if n.bit_length() >
///   bits:` (2 > 4 false); 370 `if not str:` true; 371 `if bits >= 0:` true; 372 `return [...]`
///   (the list comprehension runs in a frame of its own on 3.11 and returning to line 372 from
///   it is not a new line event).
pub const IBIN_PATH: [u32; 9] = [354, 356, 358, 361, 362, 366, 370, 371, 372];

pub struct Inst<'a> {
    pub id: &'a str,
    pub image: &'a str,
    pub test_body: &'a str,
    pub timeout_s: u64,
    pub extra_top: &'a str,
    /// Lines added to the `[tracing]` table (`scope = "tests"` traces far less than a run).
    pub tracing_extra: &'a str,
    /// `test.expect`.
    pub expect: &'a str,
    /// Lines before the test function (imports).
    pub test_top: &'a str,
}

impl Default for Inst<'_> {
    fn default() -> Self {
        Inst {
            id: "sympy-ibin-width-path",
            image: IMAGE,
            test_body: "    assert ibin(2, 4) == [0, 0, 1, 0]\n",
            timeout_s: 600,
            extra_top: "",
            tracing_extra: "",
            expect: "pass",
            test_top: "",
        }
    }
}

/// Write `<root>/sympy/<id>/` with an S1 `executed_path` question about `ibin`.
pub fn make(root: &Path, i: &Inst) -> PathBuf {
    let dir = root.join("sympy").join(i.id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("test_ibin_width.py"),
        format!(
            "import time\nfrom sympy.utilities.iterables import ibin\n{}\n\ndef test_ibin_fixed_width():\n{}",
            i.test_top, i.test_body
        ),
    )
    .unwrap();
    let toml = format!(
        r#"id = "{id}"
repository = "sympy"
package = "sympy==1.13.3"
image = "{image}"
interpreter = "/usr/bin/python3.11"
kind = "S1_IntraProceduralCFG"
{extra}question = """
Running test_ibin_width.py, which lines of `ibin` (sympy/utilities/iterables.py) execute during its
first invocation, in execution order? Absolute line numbers; lines of comprehensions and called
functions are not included.
"""
template = '{{"executed_path": [{{"line": "int"}}]}}'

[test]
files = ["test_ibin_width.py"]
command = ["python3.11", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_ibin_width.py"]
expect = "{expect}"
timeout_s = {timeout}

[tracing]
files = ["sympy/utilities/iterables.py"]
functions = ["ibin"]
{tracing_extra}
[extractor]
name = "executed_path"
params = {{ function = "ibin", invocation = 1 }}
"#,
        id = i.id,
        image = i.image,
        extra = i.extra_top,
        tracing_extra = i.tracing_extra,
        expect = i.expect,
        timeout = i.timeout_s
    );
    std::fs::write(dir.join("instance.toml"), toml).unwrap();
    dir
}

pub fn opts() -> HarvestOptions {
    let mut o = HarvestOptions::new(cache_dir());
    o.runtime = Runtime::Docker;
    o
}

pub fn run(paths: &[PathBuf], o: &HarvestOptions) -> Report {
    let mut progress = |r: &InstanceReport| {
        eprintln!(
            "{} {}: {:?} {}",
            r.status.as_str(),
            r.name,
            r.run_dir,
            r.error.as_deref().unwrap_or("")
        );
    };
    harvest_blocking(paths, o, &mut progress).expect("harvest runs")
}

pub fn expected_answer() -> Value {
    json!({"executed_path": IBIN_PATH.iter().map(|l| json!({"line": l})).collect::<Vec<_>>()})
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Copy a starter instance (with its gold answer) into `root`.
pub fn copy_starter(root: &Path, rel: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../instances")
        .join(rel);
    let dst = root.join(rel);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}

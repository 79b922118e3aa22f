//! `cargo run -p flux-interop --example answer_on_trace INSTANCE_DIR TRACE_JSONL`: the answer an
//! instance's extractor gives on a kept trace (a harvest's `trace.jsonl`), and SWE-Flux's
//! stored answer beside it when the instance has one. For working on the native mapping
//! without re-running tests.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, trace] = &args[..] else {
        return Err("usage: answer_on_trace INSTANCE_DIR TRACE_JSONL".into());
    };
    let inst = flux_instance::load_instance(std::path::Path::new(dir))?;
    let f = std::io::BufReader::new(std::fs::File::open(trace)?);
    let t = flux_trace::Trace::read_jsonl(f, trace)?;
    let answer = inst.extract(&t)?;
    println!("{}", serde_json::to_string(&answer)?);
    if let Some(theirs) = flux_instance::external::read_reference(&inst.dir)? {
        println!("{}", serde_json::to_string(&theirs)?);
        match flux_interop::external::check_reference(&inst, &answer) {
            Ok(_) => println!("equal under their scoring rules"),
            Err(e) => println!("{e:#}"),
        }
    }
    Ok(())
}

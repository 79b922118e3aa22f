//! Stand-in for `flux score` until the CLI is wired:
//! `cargo run -p flux-score --example score -- ANSWERS INSTANCES [text|json|html] [OUT]`.

use flux_score::{run_score, ScoreOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: score ANSWERS INSTANCES [text|json|html] [OUT]");
        std::process::exit(2);
    }
    let mut o = ScoreOptions::new(&args[0]);
    o.instances = vec![args[1].clone().into()];
    if let Some(f) = args.get(2) {
        match f.parse() {
            Ok(f) => o.format = f,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
    o.out = args.get(3).map(Into::into);
    match run_score(&o) {
        Ok(out) if o.out.is_none() => print!("{}", out.rendered),
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

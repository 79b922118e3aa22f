//! Chrome trace-event JSON (the "JSON trace format" ui.perfetto.dev and chrome://tracing open).
//!
//! Calls and returns become `B`/`E` duration slices per thread; lines, exceptions and test
//! boundaries become instant (`i`) events; timestamps are microseconds (floats keep the ns).
use crate::{Kind, Trace};
use serde_json::{json, Value};
use std::io::Write;

/// Build the trace-event document.
pub fn to_chrome_json(trace: &Trace) -> Value {
    let mut out = Vec::with_capacity(trace.events.len());
    for e in &trace.events {
        let ts = e.ts as f64 / 1000.0;
        let name = if e.ev == Kind::TestStart || e.ev == Kind::TestEnd {
            e.test.to_string()
        } else {
            e.name().to_string()
        };
        let mut args = serde_json::Map::new();
        args.insert("file".into(), json!(e.file()));
        args.insert("line".into(), json!(e.line));
        args.insert("src".into(), json!(crate::src_str(e.src)));
        if let Some(v) = &e.detail().value {
            args.insert("value".into(), json!(v.repr));
        }
        if let Some(x) = &e.detail().exc {
            args.insert("exc".into(), json!(format!("{}: {}", x.ty, x.msg)));
        }
        if !e.detail().locals.is_empty() {
            let locals: serde_json::Map<String, Value> = e
                .detail()
                .locals
                .iter()
                .map(|(k, v)| (k.clone(), json!(v.repr)))
                .collect();
            args.insert("locals".into(), Value::Object(locals));
        }
        let (ph, name) = match e.ev {
            Kind::Call => ("B", name),
            Kind::Return => ("E", name),
            Kind::Line => ("i", format!("line {}", e.line)),
            Kind::Exception => (
                "i",
                format!("raise {}", e.detail().exc.as_ref().map_or("", |x| &x.ty)),
            ),
            Kind::Handled => (
                "i",
                format!("handled {}", e.detail().exc.as_ref().map_or("", |x| &x.ty)),
            ),
            Kind::TestStart => ("B", name),
            Kind::TestEnd => ("E", name),
            Kind::Check => (
                "i",
                format!(
                    "check {} = {}",
                    e.detail().predicate,
                    e.detail()
                        .value
                        .as_ref()
                        .map_or("error", |v| v.repr.as_str())
                ),
            ),
        };
        let mut ev = json!({
            "name": name, "cat": e.ev.as_str(), "ph": ph, "ts": ts,
            "pid": e.pid, "tid": e.tid, "args": args,
        });
        if ph == "i" {
            ev["s"] = json!("t");
        }
        out.push(ev);
    }
    json!({ "traceEvents": out, "displayTimeUnit": "ns",
            "otherData": { "complete": trace.meta.complete, "lost_events": trace.meta.lost_events } })
}

pub fn write(trace: &Trace, mut w: impl Write) -> std::io::Result<()> {
    serde_json::to_writer(&mut w, &to_chrome_json(trace))?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, Source};

    #[test]
    fn calls_become_balanced_slices() {
        let mut c = Event::new(1000, 1, 1, Kind::Call, Source::Usdt);
        c.code_mut().func = "f".into();
        let mut r = Event::new(3000, 1, 1, Kind::Return, Source::Usdt);
        r.code_mut().func = "f".into();
        let t = Trace {
            meta: Default::default(),
            events: vec![c, r],
            facts: Default::default(),
        };
        let doc = to_chrome_json(&t);
        let evs = doc["traceEvents"].as_array().unwrap();
        assert_eq!(evs[0]["ph"], "B");
        assert_eq!(evs[1]["ph"], "E");
        assert_eq!(evs[1]["ts"], 3.0);
        assert_eq!(evs[0]["name"], "f");
    }
}

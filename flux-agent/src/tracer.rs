//! Load flux's BPF programs, attach them to an interpreter's USDT sites, and drain the ring
//! buffer with tokio.
//!
//! Order matters and is enforced by the API: configure the filter, start draining, then attach
//! (kunai's rule: the consumer runs before the first event can be produced), and only then let
//! the traced program run. Losses are counted in the kernel and reported with the events.
use crate::attach::{attach_usdt, AttachError, Attached, UprobePmu};
use crate::interp::Interpreter;
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::UProbe;
use aya::{Ebpf, EbpfLoader};
use flux_common::{
    ClassFilter, ClassPrefix, Config, SiteSpec, FILTER_KEEP, MAX_PREFIXES, MAX_SITES, NUM_COUNTERS,
    PREFIX_WORDS,
};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use tokio::io::unix::AsyncFd;

static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/flux-ebpf"));

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error("this flux was built with AYA_BUILD_SKIP: it has no eBPF programs")]
    NoObject,
    #[error("loading the eBPF programs failed (root and a BPF-enabled kernel are needed)")]
    Load(#[source] aya::EbpfError),
    #[error("enabling BPF run-time stats")]
    Stats(#[source] aya::sys::SyscallError),
    #[error("eBPF program `{0}` is not in the object")]
    NoProgram(&'static str),
    #[error("eBPF program `{name}`: {doing}")]
    Program {
        name: &'static str,
        doing: &'static str,
        #[source]
        source: aya::programs::ProgramError,
    },
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error("too many probe sites (max {MAX_SITES})")]
    TooManySites,
    #[error("BPF map `{0}` is not in the object (or was taken already)")]
    NoMap(&'static str),
    #[error("BPF map `{0}`")]
    Map(&'static str, #[source] aya::maps::MapError),
    #[error("class filter: {0}")]
    Filter(String),
}

/// [`TracerError::Program`] of program `name` while `doing`.
fn program_error(
    name: &'static str,
    doing: &'static str,
) -> impl FnOnce(aya::programs::ProgramError) -> TracerError {
    move |source| TracerError::Program {
        name,
        doing,
        source,
    }
}

pub use flux_merge::plan::ProbeSet;
pub use flux_merge::raw_store::RawStore;
pub use flux_merge::usdt::{decode_record, Counters, Drained, RawEvent};

#[derive(Clone, Debug)]
pub struct TracerOptions {
    /// Ring buffer size in bytes (a power of two, multiple of the page size).
    pub ring_bytes: u32,
    /// Pending bytes past which the kernel wakes the consumer.
    pub wakeup_bytes: u64,
    /// Consumer poll period when nothing woke it.
    pub poll: std::time::Duration,
    /// Attach the empty program instead (the trap floor, for benchmarks).
    pub empty_program: bool,
    /// The most USDT events of the program kept (the hook's own files' are not counted): past
    /// it the program is stopped and the trace is incomplete (the agent holds a trace in
    /// memory; without a budget a runaway test takes the machine's memory with it).
    pub max_events: usize,
    /// Have the kernel time the program (`BPF_ENABLE_STATS`): [`Counters::program`] then says
    /// how long it ran in all. Only for measuring: the kernel reads the clock twice per hit.
    pub program_stats: bool,
    /// JVM: keep only the method events of classes under these prefixes (`org.example.`);
    /// empty: every class (see [`Tracer::set_class_filter`]).
    pub classes: Vec<String>,
    /// Write the whole merged trace to this new file (`Trace::write_jsonl`'s lines) as the merge
    /// goes: the returned trace then holds only what the plan keeps (`Plan::keep`; issue 28).
    pub whole_trace: Option<std::path::PathBuf>,
}

impl Default for TracerOptions {
    fn default() -> Self {
        TracerOptions {
            ring_bytes: 64 << 20,
            wakeup_bytes: 2 << 20,
            poll: std::time::Duration::from_millis(10),
            empty_program: false,
            max_events: 20_000_000,
            program_stats: false,
            classes: Vec::new(),
            whole_trace: None,
        }
    }
}

pub struct Tracer {
    ebpf: Ebpf,
    pmu: UprobePmu,
    sites: Vec<SiteSpec>,
    attached: Vec<Attached>,
    opts: TracerOptions,
    /// Keeps the kernel's run-time statistics on while held.
    _stats: Option<std::os::fd::OwnedFd>,
}

impl Tracer {
    /// Load the programs and write the configuration. Nothing is attached yet. `fingerprint`
    /// is the string fingerprint's offset and masks (`Interpreter::fingerprint`).
    pub fn load(
        opts: TracerOptions,
        pidns: Option<(u64, u64)>,
        fingerprint: (i64, [u64; 2]),
    ) -> Result<Tracer, TracerError> {
        let (fp_off, fp_mask) = fingerprint;
        if EBPF_OBJECT.is_empty() {
            return Err(TracerError::NoObject);
        }
        let pmu = UprobePmu::detect()?;
        let stats = if opts.program_stats {
            Some(aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(TracerError::Stats)?)
        } else {
            None
        };
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("EVENTS", opts.ring_bytes)
            .load(EBPF_OBJECT)
            .map_err(TracerError::Load)?;
        let prog_name = program_name(&opts);
        let prog: &mut UProbe = ebpf
            .program_mut(prog_name)
            .ok_or(TracerError::NoProgram(prog_name))?
            .try_into()
            .map_err(program_error(prog_name, "not a uprobe program"))?;
        prog.load().map_err(program_error(
            prog_name,
            "loading it into the kernel (root and a BPF-enabled kernel are needed)",
        ))?;
        // The namespace filter asks the kernel once per task if the program that forgets a
        // task at its exit is attached; without it (no tracepoint support) it asks every hit.
        let ns_cache =
            pidns.is_some() && !opts.empty_program && attach_task_exit(&mut ebpf).is_ok();
        let cfg = Config {
            filter_pidns: pidns.is_some() as u32,
            ns_cache: ns_cache as u32,
            pidns_dev: pidns.map_or(0, |p| p.0),
            pidns_ino: pidns.map_or(0, |p| p.1),
            fp_off,
            wakeup_bytes: opts.wakeup_bytes,
            fp_mask,
        };
        let mut config: Array<_, Config> =
            Array::try_from(ebpf.map_mut("CONFIG").ok_or(TracerError::NoMap("CONFIG"))?)
                .map_err(|e| TracerError::Map("CONFIG", e))?;
        config
            .set(0, cfg, 0)
            .map_err(|e| TracerError::Map("CONFIG", e))?;
        Ok(Tracer {
            ebpf,
            pmu,
            sites: Vec::new(),
            attached: Vec::new(),
            opts,
            _stats: stats,
        })
    }

    /// Keep only the method events of classes whose internal name (`org/example/Foo`) starts
    /// with one of `prefixes` (dotted `org.example.` is taken too); none: keep every class.
    pub fn set_class_filter(&mut self, prefixes: &[String]) -> Result<(), TracerError> {
        let filter = class_filter(prefixes)?;
        let mut map: Array<_, ClassFilter> = Array::try_from(
            self.ebpf
                .map_mut("FILTER")
                .ok_or(TracerError::NoMap("FILTER"))?,
        )
        .map_err(|e| TracerError::Map("FILTER", e))?;
        map.set(0, filter, 0)
            .map_err(|e| TracerError::Map("FILTER", e))
    }

    /// Take the ring buffer to drain it. Call once, before attaching.
    pub fn take_ring(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        let map = self
            .ebpf
            .take_map("EVENTS")
            .ok_or(TracerError::NoMap("EVENTS"))?;
        RingBuf::try_from(map).map_err(|e| TracerError::Map("EVENTS", e))
    }

    /// Attach to every site of the selected probes of `interp`. Returns the number of sites.
    pub fn attach(&mut self, interp: &Interpreter, set: ProbeSet) -> Result<usize, TracerError> {
        let (provider, [entry, ret, line]) = interp.probe_names();
        let wanted = [(entry, set.entry), (ret, set.ret), (line, set.line)];
        let prog_name = program_name(&self.opts);
        let prog_fd = {
            let prog: &UProbe = self
                .ebpf
                .program(prog_name)
                .ok_or(TracerError::NoProgram(prog_name))?
                .try_into()
                .map_err(program_error(prog_name, "not a uprobe program"))?;
            prog.fd()
                .map_err(program_error(prog_name, "its file descriptor"))?
                .as_fd()
                .as_raw_fd()
        };
        let mut n = 0;
        for ((name, kind, layout), on) in wanted {
            if !on || name.is_empty() {
                continue;
            }
            for site in interp.probes.sites_of(provider, name) {
                let idx = self.sites.len() as u32;
                if idx >= MAX_SITES {
                    return Err(TracerError::TooManySites);
                }
                let (args, nargs) = crate::usdt::arg_array(site);
                let spec = SiteSpec {
                    kind,
                    nargs,
                    layout,
                    _pad: 0,
                    args,
                };
                let mut specs: Array<_, SiteSpec> = Array::try_from(
                    self.ebpf
                        .map_mut("SITES")
                        .ok_or(TracerError::NoMap("SITES"))?,
                )
                .map_err(|e| TracerError::Map("SITES", e))?;
                specs
                    .set(idx, spec, 0)
                    .map_err(|e| TracerError::Map("SITES", e))?;
                self.sites.push(spec);
                let a = attach_usdt(
                    &self.pmu,
                    prog_fd,
                    &interp.probes.path,
                    site.offset,
                    site.semaphore_offset,
                    idx as u64,
                )?;
                self.attached.push(a);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Detach everything (the semaphores drop back to zero).
    pub fn detach(&mut self) {
        self.attached.clear();
    }

    pub fn counters(&self) -> Result<Counters, TracerError> {
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("COUNTERS")
                .ok_or(TracerError::NoMap("COUNTERS"))?,
        )
        .map_err(|e| TracerError::Map("COUNTERS", e))?;
        let mut v = [0u64; NUM_COUNTERS as usize];
        for (i, slot) in v.iter_mut().enumerate() {
            let per = arr
                .get(&(i as u32), 0)
                .map_err(|e| TracerError::Map("COUNTERS", e))?;
            *slot = per.iter().sum();
        }
        Ok(Counters {
            events: v[flux_common::CNT_EVENTS as usize],
            lost: v[flux_common::CNT_LOST as usize],
            read_errors: v[flux_common::CNT_READ_ERR as usize],
            filtered: v[flux_common::CNT_FILTERED as usize],
            no_spec: v[flux_common::CNT_NO_SPEC as usize],
            strdefs: v[flux_common::CNT_STRDEFS as usize],
            class_filtered: v[flux_common::CNT_CLASS_FILTERED as usize],
            program: if self.opts.program_stats {
                let name = program_name(&self.opts);
                let prog: &UProbe = self
                    .ebpf
                    .program(name)
                    .ok_or(TracerError::NoProgram(name))?
                    .try_into()
                    .map_err(program_error(name, "not a uprobe program"))?;
                let info = prog
                    .info()
                    .map_err(program_error(name, "reading its info"))?;
                Some((info.run_time().as_nanos() as u64, info.run_count()))
            } else {
                None
            },
        })
    }
}

/// The kernel's class filter keeping classes whose internal name starts with one of
/// `prefixes` (dotted names are turned into internal ones; an empty list filters nothing).
pub fn class_filter(prefixes: &[String]) -> Result<ClassFilter, TracerError> {
    let mut f = ClassFilter::default();
    if prefixes.is_empty() {
        return Ok(f);
    }
    if prefixes.len() > MAX_PREFIXES {
        return Err(TracerError::Filter(format!(
            "{} class prefixes, at most {MAX_PREFIXES}",
            prefixes.len()
        )));
    }
    f.mode = FILTER_KEEP;
    f.count = prefixes.len() as u32;
    for (slot, p) in f.prefixes.iter_mut().zip(prefixes) {
        let internal = p.replace('.', "/");
        let b = internal.as_bytes();
        if b.is_empty() || b.len() > 8 * PREFIX_WORDS {
            return Err(TracerError::Filter(format!(
                "class prefix `{p}` must have 1 to {} bytes",
                8 * PREFIX_WORDS
            )));
        }
        let mut pre = ClassPrefix {
            len: b.len() as u32,
            ..ClassPrefix::default()
        };
        for (i, byte) in b.iter().enumerate() {
            let (w, shift) = (i / 8, (i % 8) * 8);
            pre.words[w] |= (*byte as u64) << shift;
            pre.mask[w] |= 0xff << shift;
        }
        *slot = pre;
    }
    Ok(f)
}

/// The uprobe program `opts` asks for: the real one, or the empty one (the trap floor).
fn program_name(opts: &TracerOptions) -> &'static str {
    if opts.empty_program {
        "flux_empty"
    } else {
        "flux_usdt"
    }
}

/// Attach `flux_task_exit` to the raw tracepoint `sched_process_exit` (kept attached as long as
/// `ebpf`; a raw tracepoint needs no tracefs).
fn attach_task_exit(ebpf: &mut Ebpf) -> Result<(), TracerError> {
    let tp: &mut aya::programs::RawTracePoint = ebpf
        .program_mut("flux_task_exit")
        .ok_or(TracerError::NoProgram("flux_task_exit"))?
        .try_into()
        .map_err(program_error(
            "flux_task_exit",
            "not a raw tracepoint program",
        ))?;
    tp.load().map_err(program_error(
        "flux_task_exit",
        "loading it into the kernel",
    ))?;
    tp.attach("sched_process_exit").map_err(program_error(
        "flux_task_exit",
        "attaching to sched_process_exit",
    ))?;
    Ok(())
}

/// Drain the ring buffer until `stop` fires, then once more to the end.
pub async fn drain(
    ring: RingBuf<MapData>,
    poll: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
    max_events: usize,
    over: tokio::sync::watch::Sender<bool>,
) -> std::io::Result<(Drained, RingBuf<MapData>)> {
    // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until
    // `into_inner` hands the ring back.
    let mut afd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE)? };
    let mut out = Drained {
        events: spill_store(),
        ..Drained::default()
    };
    let mut tick = tokio::time::interval(poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let stopping = *stop.borrow();
        {
            let ring = afd.get_mut();
            while let Some(item) = ring.next() {
                if out.over(max_events) {
                    out.over_budget += 1;
                    continue;
                }
                decode_record(&item, &mut out);
            }
            if out.over_budget > 0 && !*over.borrow() {
                let _ = over.send(true);
            }
        }
        if stopping {
            break;
        }
        tokio::select! {
            g = afd.readable_mut() => { if let Ok(mut g) = g { g.clear_ready(); } }
            _ = tick.tick() => {}
            _ = stop.changed() => {}
        }
    }
    if let Some(e) = out.events.kept().spill_error() {
        eprintln!("flux: {e}: the USDT records after it stay in memory");
    }
    Ok((out, afd.into_inner()))
}

/// Raw USDT records the drainer holds before it writes them, a block per thread at a time, to
/// an unlinked file (32 MiB): past it the agent's memory does not grow with the run's records
/// (issue 28), and the merge reads them back a thread at a time. `FLUX_SPILL_AFTER` (a number
/// of records) sets another bound, for the hook's records too, and a quarter of it bounds the
/// merged events a harvest holds while it writes the whole trace: 0 spills every full block
/// (what the CI smoke does, so a small run takes the path a heavy one takes).
pub const SPILL_AFTER: usize = 1 << 20;

/// Records held before the rest go to a file: [`SPILL_AFTER`], or `FLUX_SPILL_AFTER`.
pub fn spill_after() -> usize {
    std::env::var("FLUX_SPILL_AFTER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SPILL_AFTER)
}

/// An unlinked file in the temporary directory (`TMPDIR`) for `what` past the bound, or none
/// (said on stderr: they then stay in memory, which only costs memory).
pub fn spill_file(what: &str) -> Option<std::fs::File> {
    tempfile::tempfile()
        .map_err(|e| {
            eprintln!(
                "flux: no spill file in {} ({e}): {what} stay in memory",
                std::env::temp_dir().display()
            )
        })
        .ok()
}

/// The drainer's store: spilling to a [`spill_file`], or held in memory without one.
fn spill_store() -> RawStore {
    match spill_file("the USDT records") {
        Some(f) => RawStore::spilling(f, spill_after()),
        None => RawStore::default(),
    }
}

/// Is this process allowed to load BPF programs? (Root, or CAP_BPF+CAP_PERFMON.) Used by tests
/// and the CLI to explain a skip or a failure before trying.
pub fn can_trace() -> Result<(), String> {
    // SAFETY: trivial syscall.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: loading eBPF programs needs root".into());
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        return Err("the kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe)".into());
    }
    if EBPF_OBJECT.is_empty() {
        return Err("flux was built with AYA_BUILD_SKIP=1 (no eBPF object)".into());
    }
    Ok(())
}

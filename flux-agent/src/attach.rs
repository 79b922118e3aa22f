//! Attaching a loaded BPF program to one USDT site, with its semaphore.
//!
//! Why not aya's `UProbe::attach`: it cannot pass the uprobe's `ref_ctr_offset`, and CPython only
//! fires a probe while its semaphore is non-zero. So we open the uprobe perf event ourselves:
//! `perf_event_open` with the dynamic `uprobe` PMU, `config1` = path, `config2` = file offset of
//! the site, and the semaphore's file offset in the config bits named by
//! `/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset` (`config:32-63`). The kernel then
//! increments the semaphore in every process that maps the file, including ones already running.
//! The program is bound with `BPF_LINK_CREATE` (attach type `BPF_PERF_EVENT`) so that each site
//! carries a BPF cookie: the index of its [`flux_common::SiteSpec`].
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("uprobe PMU not available ({path}): {source}; is CONFIG_UPROBE_EVENTS on?")]
    Pmu {
        path: &'static str,
        source: std::io::Error,
    },
    #[error(
        "unexpected format `{0}` in /sys/bus/event_source/devices/uprobe/format/ref_ctr_offset"
    )]
    RefCtrFormat(String),
    #[error("perf_event_open(uprobe {path}+{offset:#x}, ref_ctr {ref_ctr:#x}): {source}")]
    Open {
        path: String,
        offset: u64,
        ref_ctr: u64,
        source: std::io::Error,
    },
    #[error("BPF_LINK_CREATE for uprobe {path}+{offset:#x}: {source}")]
    Link {
        path: String,
        offset: u64,
        source: std::io::Error,
    },
}

/// What the kernel's uprobe PMU wants, read once from sysfs.
#[derive(Clone, Copy, Debug)]
pub struct UprobePmu {
    pub pmu_type: u32,
    /// Bit position of the ref_ctr offset in `perf_event_attr.config`.
    pub ref_ctr_shift: u32,
}

impl UprobePmu {
    pub fn detect() -> Result<UprobePmu, AttachError> {
        const TYPE: &str = "/sys/bus/event_source/devices/uprobe/type";
        const REF: &str = "/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset";
        let t = std::fs::read_to_string(TYPE)
            .map_err(|source| AttachError::Pmu { path: TYPE, source })?;
        let pmu_type = t
            .trim()
            .parse()
            .map_err(|_| AttachError::RefCtrFormat(t.clone()))?;
        let f = std::fs::read_to_string(REF)
            .map_err(|source| AttachError::Pmu { path: REF, source })?;
        // "config:32-63"
        let shift = f
            .trim()
            .strip_prefix("config:")
            .and_then(|r| r.split('-').next())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| AttachError::RefCtrFormat(f.trim().to_string()))?;
        Ok(UprobePmu {
            pmu_type,
            ref_ctr_shift: shift,
        })
    }
}

/// An attached site: dropping it detaches (closes the link and the perf event).
#[derive(Debug)]
pub struct Attached {
    _link: OwnedFd,
    _perf: OwnedFd,
}

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PERF_EVENT: u32 = 41;

/// Attach `prog_fd` at `offset` of `path` with the semaphore at `ref_ctr` (0 = none) and the
/// given BPF cookie, for every process (pid -1; see [`crate::turns`] for what that asks of runs
/// side by side).
pub fn attach_usdt(
    pmu: &UprobePmu,
    prog_fd: RawFd,
    path: &Path,
    offset: u64,
    ref_ctr: u64,
    cookie: u64,
) -> Result<Attached, AttachError> {
    let path_s = path.display().to_string();
    let perf = open_uprobe(pmu, path, offset, ref_ctr, None)?;
    // union bpf_attr, link_create: prog_fd u32 @0, target_fd u32 @4, attach_type u32 @8,
    // flags u32 @12, perf_event.bpf_cookie u64 @16.
    let mut battr = [0u8; 64];
    battr[0..4].copy_from_slice(&(prog_fd as u32).to_ne_bytes());
    battr[4..8].copy_from_slice(&(perf.as_raw_fd() as u32).to_ne_bytes());
    battr[8..12].copy_from_slice(&BPF_PERF_EVENT.to_ne_bytes());
    battr[16..24].copy_from_slice(&cookie.to_ne_bytes());
    // SAFETY: battr is a zeroed bpf_attr of the given size with the link_create fields set.
    let link = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            battr.as_ptr(),
            battr.len() as libc::c_uint,
        )
    };
    if link < 0 {
        return Err(AttachError::Link {
            path: path_s,
            offset,
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: as above.
    let link = unsafe { OwnedFd::from_raw_fd(link as RawFd) };
    Ok(Attached {
        _link: link,
        _perf: perf,
    })
}

/// A uprobe perf event at `offset` of `path` with the semaphore at `ref_ctr` (0 = none): for
/// every process mapping the file (`pid` `None`), or for that one process. Opening it installs
/// the breakpoint and raises the semaphore in those processes, with or without a program.
pub fn open_uprobe(
    pmu: &UprobePmu,
    path: &Path,
    offset: u64,
    ref_ctr: u64,
    pid: Option<u32>,
) -> Result<OwnedFd, AttachError> {
    let open_err = |source| AttachError::Open {
        path: path.display().to_string(),
        offset,
        ref_ctr,
        source,
    };
    let cpath = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| open_err(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    // struct perf_event_attr, laid out by hand (PERF_ATTR_SIZE_VER5 = 112 bytes is enough):
    // type u32 @0, size u32 @4, config u64 @8, sample_period @16, sample_type @24,
    // read_format @32, flags @40, wakeup_events u32 @48, bp_type u32 @52, config1 @56,
    // config2 @64.
    let mut attr = [0u64; 16];
    attr[0] = (pmu.pmu_type as u64) | ((128u64) << 32);
    attr[1] = if ref_ctr != 0 {
        ref_ctr << pmu.ref_ctr_shift
    } else {
        0
    };
    attr[2] = 1; // sample_period
    attr[7] = cpath.as_ptr() as u64; // config1: uprobe_path
    attr[8] = offset; // config2: probe_offset
                      // Every process: pid -1 on one CPU (a uprobe fires on any); one process: any CPU.
    let (pid, cpu) = match pid {
        None => (-1, 0),
        Some(p) => (p as libc::pid_t, -1),
    };
    // SAFETY: attr is a valid, zero-initialised perf_event_attr of the size it declares; the
    // path outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(open_err(std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

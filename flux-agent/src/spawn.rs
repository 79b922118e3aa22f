//! Run a command on the host in a PID namespace of its own, held at a gate until the tracer is
//! attached.
//!
//! Why a PID namespace: a uprobe fires in every process that maps the probed file (another
//! python on the host, other containers). The BPF program keeps only tasks whose active PID
//! namespace is the traced one, which is exactly "this command and everything it starts", and
//! the same filter serves containers (Docker gives each its own PID namespace). As a bonus the
//! program sees the ids its own `os.getpid()` returns, so the hook's stream and the kernel's
//! agree on pid/tid without translation.
//!
//! How, without re-executing ourselves: the child std spawns (A) runs, before exec,
//! `setsid(); unshare(CLONE_NEWPID); fork()`. The grandchild (B) is PID 1 of the new namespace:
//! it waits on the gate pipe and then execs the command. A closes every other descriptor (so
//! `spawn` returns at once), waits for B and exits with B's status. Only async-signal-safe calls
//! happen between fork and exec.
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("command `{0}` not found on PATH")]
    NotFound(String),
    #[error("cannot start `{cmd}`: {source}")]
    Start { cmd: String, source: std::io::Error },
    #[error("cannot read the PID namespace of the traced command: {0}")]
    Namespace(std::io::Error),
}

/// A command started in its own PID namespace, not yet running its program.
pub struct Gated {
    child: Option<Child>,
    pid: u32,
    gate: Option<std::fs::File>,
    /// (device, inode) of the new PID namespace, for the BPF filter.
    pub pidns: (u64, u64),
    /// The blocking wait on the child, once started (`Launched::wait` may be dropped and
    /// called again: an event budget kills the program while it is being waited for), and
    /// its exit code once known.
    pub(crate) waiter: Option<tokio::task::JoinHandle<std::io::Result<std::process::ExitStatus>>>,
    pub(crate) exit: Option<i32>,
}

impl Gated {
    /// Host pid of the intermediate process (the namespace's PID 1 is its only child).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Let the program run.
    pub fn release(&mut self) -> std::io::Result<()> {
        if let Some(mut g) = self.gate.take() {
            g.write_all(b"g")?;
        }
        Ok(())
    }

    /// Kill the whole process group (the intermediate process and the namespace's init, whose
    /// death ends everything else in the namespace).
    pub fn kill(&mut self) {
        // SAFETY: plain syscall; the group id is our child's pid (it called setsid).
        unsafe {
            libc::killpg(self.pid as libc::pid_t, libc::SIGKILL);
        }
    }

    /// The process to wait for (taken once, e.g. to wait on a blocking thread).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }
}

/// Resolve `prog` on PATH the way execvp would, so a missing command is a clear error before
/// anything forks.
pub fn resolve(prog: &str) -> Option<std::path::PathBuf> {
    if prog.contains('/') {
        let p = std::path::PathBuf::from(prog);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Start `cmd` in a new PID namespace, held until [`Gated::release`].
pub fn spawn_gated(mut cmd: Command) -> Result<Gated, SpawnError> {
    let prog = cmd.get_program().to_string_lossy().into_owned();
    if resolve(&prog).is_none() {
        return Err(SpawnError::NotFound(prog));
    }
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(SpawnError::Start {
            cmd: prog,
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: both fds were just created and are owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let gate_fd = rd.as_raw_fd();
    let gate_wr = wr.as_raw_fd();
    // SAFETY: the closure only makes async-signal-safe calls (personality, setsid, unshare,
    // fork, read, waitpid, close_range, fcntl, _exit).
    unsafe {
        cmd.pre_exec(move || {
            // Determinism (17.4, flux-hook/README.md "Determinism"): without address-space
            // randomisation the same run lays out its objects at the same addresses, so sets
            // and dicts of objects hashed by identity (types, functions: SymPy's multiple
            // dispatch) iterate in the same order from run to run. Inherited across exec.
            let persona = libc::personality(0xffff_ffff);
            if persona >= 0 {
                libc::personality((persona | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong);
            }
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::unshare(libc::CLONE_NEWPID) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::fork();
            if pid < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if pid == 0 {
                // B: PID 1 of the new namespace. Wait for the gate, then exec. Close our copy
                // of the write end so a vanished tracer reads as EOF.
                libc::close(gate_wr);
                // Also close std's exec-status pipe (and anything else inherited), or spawn()
                // would wait for our exec, which waits for the gate: the command's program was
                // resolved before forking, so an exec failure still shows as exit status 1.
                let g = gate_fd as u32;
                if g > 3 {
                    libc::syscall(libc::SYS_close_range, 3u32, g - 1, 0u32);
                }
                libc::syscall(libc::SYS_close_range, g + 1, u32::MAX, 0u32);
                let mut b = 0u8;
                loop {
                    let n = libc::read(gate_fd, &mut b as *mut u8 as *mut libc::c_void, 1);
                    if n == 1 && b == b'g' {
                        break;
                    }
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    // The tracer went away before releasing us: never run untraced.
                    libc::_exit(125);
                }
                libc::close(gate_fd);
                return Ok(());
            }
            // A: release std's exec-status pipe (and everything else) so spawn() returns,
            // then mirror B's fate.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
            let mut status = 0;
            loop {
                let r = libc::waitpid(pid, &mut status, 0);
                if r == pid {
                    break;
                }
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            libc::_exit(128 + libc::WTERMSIG(status));
        });
    }
    // The gate's read end must survive exec in nobody but B; it is inherited through fork
    // (pre_exec runs before the CLOEXEC close), and B closes it before exec.
    let child = cmd.spawn().map_err(|source| SpawnError::Start {
        cmd: prog.clone(),
        source,
    })?;
    drop(rd);
    let ns = std::fs::metadata(format!("/proc/{}/ns/pid_for_children", child.id()))
        .map_err(SpawnError::Namespace)?;
    Ok(Gated {
        pid: child.id(),
        child: Some(child),
        gate: Some(std::fs::File::from(wr)),
        pidns: (ns.dev(), ns.ino()),
        waiter: None,
        exit: None,
    })
}

/// (device, inode) of the PID namespace a process lives in.
pub fn pidns_of(pid: u32) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(format!("/proc/{pid}/ns/pid"))?;
    Ok((m.dev(), m.ino()))
}

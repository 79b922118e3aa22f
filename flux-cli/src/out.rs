//! The binary's stdout and stderr, written so that a closed stream never stops it.
//!
//! std's `println!` and `eprintln!` panic when the write fails: `flux harvest --json | head`
//! panicked as soon as `head` exited, killing a batch half-way (its running container left to
//! its deadline). Every print of this binary goes through [`write`] instead (main.rs shadows
//! the four std macros): the first failure on a stream marks it closed — later output to it is
//! dropped — and is noted once on stderr (if that is still open); the batch goes on. Rust runs
//! with SIGPIPE ignored, so a closed pipe is an `EPIPE` here, never a signal.
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Stream {
    Stdout,
    Stderr,
}

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

fn closed(s: Stream) -> &'static AtomicBool {
    match s {
        Stream::Stdout => &STDOUT_CLOSED,
        Stream::Stderr => &STDERR_CLOSED,
    }
}

/// Write `args` (and a newline) to `stream`, unless it was found closed before.
pub fn write(stream: Stream, args: std::fmt::Arguments<'_>, newline: bool) {
    if closed(stream).load(Ordering::Relaxed) {
        return;
    }
    let result = match stream {
        Stream::Stdout => emit(&mut std::io::stdout().lock(), args, newline),
        Stream::Stderr => emit(&mut std::io::stderr().lock(), args, newline),
    };
    if let Err(e) = result {
        if !closed(stream).swap(true, Ordering::Relaxed) && stream == Stream::Stdout {
            write(
                Stream::Stderr,
                format_args!("flux: stdout is closed ({e}); its further output is dropped"),
                true,
            );
        }
    }
}

fn emit(w: &mut dyn Write, args: std::fmt::Arguments<'_>, newline: bool) -> std::io::Result<()> {
    w.write_fmt(args)?;
    if newline {
        w.write_all(b"\n")?;
        w.flush()?;
    }
    Ok(())
}

/// Whether `e` (an error with its causes) is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn broken_pipes_are_told_from_other_errors() {
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the trace");
        assert!(super::is_broken_pipe(&e));
        let e = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!super::is_broken_pipe(&e));
    }
}

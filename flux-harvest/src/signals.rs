//! SIGINT and SIGTERM while test code runs: stop it, remove its container, report.
//!
//! Without this, a `flux harvest` stopped by Ctrl-C or `kill` died at once and its container
//! ran on until its own deadline (or, before containers had one, forever). The handlers are
//! installed when a harvest starts (from then on the signals no longer end the process by
//! themselves); on a signal the instance being harvested is dropped — its container is removed
//! by `flux_container::Container`'s `Drop`, a host run's process group killed by its own — every
//! container this process still has is removed, and the harvest returns what it did so far with
//! [`Interrupted`] set. A SIGKILLed flux cannot do any of this: the container's own deadline
//! (`flux_container::runtime`) ends it then.
use serde::Serialize;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The signal that stopped a harvest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Interrupted {
    #[serde(rename = "SIGINT")]
    Sigint,
    #[serde(rename = "SIGTERM")]
    Sigterm,
}

impl Interrupted {
    pub fn as_str(self) -> &'static str {
        match self {
            Interrupted::Sigint => "SIGINT",
            Interrupted::Sigterm => "SIGTERM",
        }
    }

    /// What a shell reports for a process the signal ended: 128 + its number.
    pub fn exit_code(self) -> u8 {
        match self {
            Interrupted::Sigint => 128 + 2,
            Interrupted::Sigterm => 128 + 15,
        }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two signals, caught. Must be made inside a tokio runtime.
pub(crate) struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    pub(crate) fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// The next SIGINT or SIGTERM.
    pub(crate) async fn recv(&mut self) -> Interrupted {
        tokio::select! {
            _ = self.int.recv() => Interrupted::Sigint,
            _ = self.term.recv() => Interrupted::Sigterm,
        }
    }
}

/// `fut` run to its end, or stopped by SIGINT/SIGTERM: then it is dropped (its container
/// removed by `Container`'s `Drop`, a host run's process group killed by its own), every
/// container this process still has is removed, and the signal is returned. For one-run
/// commands (`flux bench-run`) that would otherwise die at the signal with their container
/// left running until its deadline.
pub async fn until_interrupted<F: std::future::Future>(fut: F) -> Result<F::Output, Interrupted> {
    let Ok(mut signals) = Signals::install() else {
        // Without handlers the signals end the process as they always did.
        return Ok(fut.await);
    };
    tokio::select! {
        r = fut => Ok(r),
        sig = signals.recv() => {
            if let Ok(rt) = flux_container::Runtime::connect().await {
                let _ = rt.remove_own().await;
            }
            Err(sig)
        }
    }
}

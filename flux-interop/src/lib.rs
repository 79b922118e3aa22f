//! SWE-Flux interop: their instances become flux instances, their parsers answer them on
//! flux's traces, and their stored answers check flux's.
//!
//! Why a crate of its own: importing needs their layout (`eval.sh`, `files/`, `oracle.json`),
//! answering needs a container run of third-party code (their `parser.py`), checking needs
//! their scoring rules; none of that belongs to the instance format (`flux-instance`, which
//! only knows that an instance may be answered by [`flux_instance::external::SWE_FLUX_PARSER`])
//! or to the harvest (`flux-harvest`, which calls [`external::run_parser`] where it would run
//! an extractor, and [`external::check_reference`] in `--check`).
//!
//! - [`evalsh`]: their `eval.sh`, read (never run);
//! - [`import`]: `flux import swe-flux`;
//! - [`native`]: their question asked of a flux extractor (the native instance), read from
//!   their parser's constants ([`parser_facts`]), eval.sh and the answer's shape first;
//! - [`external`]: their parser on flux's log, in the container; the check against their answer.
//!
//! The log their parsers read is written by [`sweflux_log`] from flux's trace; the
//! tracing config that records what it needs comes from their variables
//! (`LogConfig::tracing_config`). Export to their layout is `flux_instance::export`.
//!
//! Datasets for other harnesses are written here too: [`hf`] (a Hugging Face dataset whose rows
//! hold the prompts `flux eval` renders, in Parquet ([`parquet_out`]) and JSONL, with its card,
//! [`card`]) and [`inspect`] (an Inspect task over it that scores with `flux score`).
pub mod card;
pub mod evalsh;
pub mod evidence;
pub mod external;
pub mod hf;
pub mod import;
pub mod inspect;
pub mod native;
pub mod parquet_out;
pub mod parser_facts;
pub mod sweflux_log;

//! compactlab's native core (#59): parts of the per-call replay in Rust, each behind the typed
//! per-call seam of `docs/architecture.md` and each tested against the Python engine, which stays
//! the reference. `COMPACTLAB_CORE=python|native` chooses (`compactlab/core.py`).

pub mod allocator;
pub mod bootstrap;
pub mod cache;
pub mod claude_code;
pub mod csv_text;
pub mod facts;
pub mod float_text;
pub mod iso_time;
pub mod layers;
pub mod lines;
pub mod normal;
pub mod pieces;
pub mod pricing;
pub mod probe_cache;
pub mod recall;
pub mod strings;
pub mod stub;
pub mod violations;

#[cfg(feature = "python")]
mod bindings;
#[cfg(feature = "python")]
mod instances;
#[cfg(feature = "python")]
mod ledger;
#[cfg(feature = "python")]
mod members;
#[cfg(feature = "python")]
mod package_toml;
#[cfg(feature = "python")]
mod records;
#[cfg(feature = "python")]
mod seam;
#[cfg(feature = "python")]
mod turns;

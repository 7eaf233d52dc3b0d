//! The rules, one module each. Every rule but `layers` is `fn(&Tree) -> Vec<Violation>`;
//! `layers` also takes the workspace's packages from `cargo metadata`.

pub mod cli_reads;
pub mod command_lists;
pub mod device;
pub mod exhaustive;
pub mod layers;
pub mod long_files;
pub mod store_calls;
pub mod support_copies;

use crate::{Tree, Violation};

/// A rule over the tree alone.
pub type Check = fn(&Tree) -> Vec<Violation>;

/// The rules over the tree alone, by name.
pub const ALL: &[(&str, Check)] = &[
    (device::RULE, device::check),
    (cli_reads::RULE, cli_reads::check),
    (command_lists::RULE, command_lists::check),
    (long_files::RULE, long_files::check),
    (store_calls::RULE, store_calls::check),
    (exhaustive::RULE, exhaustive::check),
    (support_copies::RULE, support_copies::check),
];

mod calls;
mod catalogue;
mod direct;
mod direct_sessions;
mod direct_support;
mod identity;
mod names;
mod results;
mod sessions;

pub use openphone_test_support::registry;

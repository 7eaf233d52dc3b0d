mod calls;
mod catalogue;
mod identity;
mod names;
mod results;
mod sessions;

use openphone_protocol::Registry;

pub fn registry() -> &'static Registry {
    Registry::embedded().expect("the shipped manifests load")
}

//! The phones one daemon drives, by id ([`Devices`]), and how a request picks one.
//!
//! A daemon with one phone calls it [`DEFAULT_DEVICE_ID`] (or the id its configuration gives
//! it) and every request goes to it, whether or not it names it. With several phones
//! (`[[devices]]`), a request must name one (`device_id`); naming none, or one that is not
//! configured, is refused with the list of ids, before anything is decided or run. Which
//! phones a runtime may act on at all (`[[runtimes]] devices`) is [`DeviceGrants`].

use std::collections::BTreeMap;
use std::sync::Arc;

use openphone_device::PhoneDevice;

/// The id of a daemon's only phone when the configuration names none.
pub const DEFAULT_DEVICE_ID: &str = "default";

/// The longest device id accepted.
pub const DEVICE_ID_CHARS: usize = 64;

/// The phones of one daemon, in configuration order (the first is the primary one: the
/// phone whose world events, notifications and page reads the daemon uses).
#[derive(Clone)]
pub struct Devices {
    list: Vec<(String, Arc<dyn PhoneDevice>)>,
}

impl std::fmt::Debug for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Devices").field("ids", &self.ids()).finish()
    }
}

/// Why a request names no usable device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceRouteError {
    /// Several phones and the request named none.
    #[error(
        "this daemon drives several phones ({}): name one with `device_id`",
        .ids.join(", ")
    )]
    Unnamed { ids: Vec<String> },
    /// The request named a phone that is not configured.
    #[error(
        "no phone has device_id {id:?}: the configured ones are {}",
        .ids.join(", ")
    )]
    Unknown { id: String, ids: Vec<String> },
}

impl DeviceRouteError {
    /// The configured device ids the error lists.
    pub fn ids(&self) -> &[String] {
        match self {
            DeviceRouteError::Unnamed { ids } | DeviceRouteError::Unknown { ids, .. } => ids,
        }
    }
}

/// Whether `id` is a usable device id: 1 to 64 characters of `[A-Za-z0-9._:-]` (a serial such
/// as `127.0.0.1:5555` or `emulator-5554` is one).
pub fn check_device_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > DEVICE_ID_CHARS {
        return Err(format!(
            "device id {id:?} must be 1 to {DEVICE_ID_CHARS} characters"
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "device id {id:?} holds {bad:?}: use letters, digits, `.`, `_`, `:` and `-`"
        ));
    }
    Ok(())
}

impl Devices {
    /// One phone, called [`DEFAULT_DEVICE_ID`].
    pub fn single(device: Arc<dyn PhoneDevice>) -> Devices {
        Devices {
            list: vec![(DEFAULT_DEVICE_ID.to_owned(), device)],
        }
    }

    /// These phones, by id, in order: at least one, each id usable and unique.
    pub fn new(list: Vec<(String, Arc<dyn PhoneDevice>)>) -> Result<Devices, String> {
        if list.is_empty() {
            return Err("no device configured".into());
        }
        for (i, (id, _)) in list.iter().enumerate() {
            check_device_id(id)?;
            if list[..i].iter().any(|(other, _)| other == id) {
                return Err(format!("device id {id:?} is configured twice"));
            }
        }
        Ok(Devices { list })
    }

    /// The ids, in order.
    pub fn ids(&self) -> Vec<String> {
        self.list.iter().map(|(id, _)| id.clone()).collect()
    }

    /// How many phones.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Never true (a `Devices` holds at least one phone); for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether requests must name their phone.
    pub fn several(&self) -> bool {
        self.list.len() > 1
    }

    /// The phone with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn PhoneDevice>> {
        self.list
            .iter()
            .find(|(d, _)| d == id)
            .map(|(_, device)| device)
    }

    /// The first phone and its id.
    pub fn primary(&self) -> (&str, &Arc<dyn PhoneDevice>) {
        // `new` and `single` never make an empty list.
        let (id, device) = &self.list[0];
        (id.as_str(), device)
    }

    /// Every phone with its id, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<dyn PhoneDevice>)> {
        self.list.iter().map(|(id, device)| (id.as_str(), device))
    }

    /// The phone a request naming `requested` goes to: the named one, or the only one.
    pub fn resolve(
        &self,
        requested: Option<&str>,
    ) -> Result<(&str, &Arc<dyn PhoneDevice>), DeviceRouteError> {
        match requested {
            Some(id) => self
                .list
                .iter()
                .find(|(d, _)| d == id)
                .map(|(d, device)| (d.as_str(), device))
                .ok_or_else(|| DeviceRouteError::Unknown {
                    id: id.to_owned(),
                    ids: self.ids(),
                }),
            None if self.several() => Err(DeviceRouteError::Unnamed { ids: self.ids() }),
            None => Ok(self.primary()),
        }
    }
}

/// Which phones each runtime may act on (`[[runtimes]] devices`), by runtime id. A runtime
/// not listed may act on every phone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceGrants {
    by_runtime: BTreeMap<String, Vec<String>>,
}

impl DeviceGrants {
    /// Every runtime may act on every phone.
    pub fn all() -> DeviceGrants {
        DeviceGrants::default()
    }

    /// Limits `runtime` to `devices`.
    pub fn limit(&mut self, runtime: &str, devices: Vec<String>) {
        self.by_runtime.insert(runtime.to_owned(), devices);
    }

    /// Whether `runtime` may act on `device`.
    pub fn allows(&self, runtime: &str, device: &str) -> bool {
        self.by_runtime
            .get(runtime)
            .is_none_or(|list| list.iter().any(|d| d == device))
    }

    /// Every runtime limited to some phones, with its phones.
    pub fn limited(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.by_runtime
            .iter()
            .map(|(runtime, list)| (runtime.as_str(), list.as_slice()))
    }

    /// The phones `runtime` is limited to (`None`: every phone).
    pub fn of(&self, runtime: &str) -> Option<&[String]> {
        self.by_runtime.get(runtime).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn device_ids_are_checked() {
        for ok in ["pixel", "127.0.0.1:5555", "emulator-5554", "a_b"] {
            check_device_id(ok).unwrap();
        }
        for bad in ["", "two words", "x/y", &"a".repeat(65)] {
            assert!(check_device_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn grants_default_to_every_phone() {
        let mut grants = DeviceGrants::all();
        assert!(grants.allows("hermes", "pixel"));
        grants.limit("hermes", vec!["pixel".into()]);
        assert!(grants.allows("hermes", "pixel"));
        assert!(!grants.allows("hermes", "work"));
        assert!(grants.allows("other", "work"));
    }
}

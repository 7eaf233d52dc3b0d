//! Searching contacts.

use serde_json::{Value, json};

use crate::DeviceError;
use crate::params::Params;
use crate::sim::model::{contains_ci, looks_like_number, normalize_contains, numbers_match};

use super::records::contact_json;
use super::{Exec, Outcome};

pub(crate) fn contacts_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let limit = p.limit("limit", 20, 200)?;
    let details = p.bool_opt("include_details")?.unwrap_or(false);
    let mut matches: Vec<_> =
        x.st.contacts
            .iter()
            .filter(|c| {
                query.is_none_or(|q| {
                    contains_ci(&c.name, q)
                        || c.organization.as_deref().is_some_and(|o| contains_ci(o, q))
                        || c.emails.iter().any(|e| contains_ci(&e.address, q))
                        || (looks_like_number(q)
                            && c.phones.iter().any(|ph| {
                                numbers_match(&ph.number, q) || normalize_contains(&ph.number, q)
                            }))
                })
            })
            .collect();
    matches.sort_by_key(|c| (!c.starred, c.name.to_lowercase()));
    let list: Vec<Value> = matches
        .iter()
        .take(limit)
        .map(|c| contact_json(c, details))
        .collect();
    Ok(Outcome::read(
        json!({ "count": list.len(), "total": matches.len(), "contacts": list }),
    ))
}

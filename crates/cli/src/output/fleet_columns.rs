//! The HOST and PHONE columns of the operator's lists (`jobs list`, `inbox`, `goals list`) on a
//! daemon of a fleet (issue 35): the daemons sharing one PostgreSQL store each list the whole
//! fleet, and every row names the daemon it belongs to and its phone. The columns appear only
//! when some row names a host, so a lone daemon's lists read as they always did.

use openphone_protocol::display_text;
use openphone_protocol::endpoint::RowHost;

/// What a row holds where it is shown with no value.
const NONE: &str = "-";
/// Between two columns.
const GAP: &str = "  ";

/// The widths of the two columns of one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FleetColumns {
    host: usize,
    phone: usize,
}

impl FleetColumns {
    /// The columns for `rows` (each row's host and phone), or `None` when no row names a
    /// host: then the list is printed as without a fleet.
    pub(crate) fn of<'a>(
        rows: impl IntoIterator<Item = (Option<&'a RowHost>, Option<&'a str>)>,
    ) -> Option<FleetColumns> {
        let mut columns = FleetColumns {
            host: "HOST".len(),
            phone: "PHONE".len(),
        };
        let mut any_host = false;
        for (host, phone) in rows {
            any_host |= host.is_some();
            columns.host = columns.host.max(width(&host_text(host)));
            columns.phone = columns.phone.max(width(&phone_text(phone)));
        }
        any_host.then_some(columns)
    }

    /// The header line: `HOST  PHONE  <rest>`.
    pub(crate) fn header(&self, rest: &str) -> String {
        format!("{}{rest}", self.cells_of("HOST", "PHONE"))
    }

    /// One row's cells, padded, with the gap after them: what goes before the row's text.
    pub(crate) fn cells(&self, host: Option<&RowHost>, phone: Option<&str>) -> String {
        self.cells_of(&host_text(host), &phone_text(phone))
    }

    fn cells_of(&self, host: &str, phone: &str) -> String {
        format!(
            "{host}{}{GAP}{phone}{}{GAP}",
            pad(host, self.host),
            pad(phone, self.phone)
        )
    }
}

/// A row's host as a person reads it: the daemon that made it, and `→<daemon>` when another
/// daemon's claim runs (or last ran) it.
pub(crate) fn host_text(host: Option<&RowHost>) -> String {
    match host {
        None => NONE.to_owned(),
        Some(h) => match h.lease_owner.as_deref() {
            Some(runner) if runner != h.host_id => {
                format!("{}→{}", display_text(&h.host_id), display_text(runner))
            }
            Some(_) | None => display_text(&h.host_id).into_owned(),
        },
    }
}

fn phone_text(phone: Option<&str>) -> String {
    phone.map_or_else(|| NONE.to_owned(), |p| display_text(p).into_owned())
}

/// Characters, not bytes: `→` is one column.
fn width(text: &str) -> usize {
    text.chars().count()
}

fn pad(text: &str, to: usize) -> String {
    " ".repeat(to.saturating_sub(width(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, lease: Option<&str>) -> RowHost {
        RowHost {
            host_id: id.to_owned(),
            lease_owner: lease.map(str::to_owned),
        }
    }

    #[test]
    fn no_columns_when_no_row_names_a_host() {
        assert_eq!(FleetColumns::of([]), None);
        assert_eq!(
            FleetColumns::of([(None, Some("pixel-1")), (None, None)]),
            None,
            "a lone daemon's rows (phones but no hosts) keep the old layout"
        );
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_or_heading() {
        let a = host("host-a", None);
        let b = host("b", Some("host-long"));
        let cols = FleetColumns::of([(Some(&a), Some("pixel-7-pro")), (Some(&b), None)])
            .expect("rows with hosts have columns");
        // `b→host-long` is 11 characters (the arrow is one); `pixel-7-pro` 11.
        assert_eq!(cols.header("JOB"), "HOST         PHONE        JOB");
        assert_eq!(
            cols.cells(Some(&a), Some("pixel-7-pro")),
            "host-a       pixel-7-pro  "
        );
        assert_eq!(cols.cells(Some(&b), None), "b→host-long  -            ");
        // Short cells are padded to the headings.
        let c = host("c", None);
        let cols = FleetColumns::of([(Some(&c), None)]).unwrap();
        assert_eq!(cols.cells(Some(&c), None), "c     -      ");
        assert_eq!(cols.header(""), "HOST  PHONE  ");
    }

    #[test]
    fn a_row_without_a_host_among_fleet_rows_shows_a_dash() {
        let a = host("a", None);
        let cols = FleetColumns::of([(Some(&a), None), (None, Some("p"))]).unwrap();
        assert_eq!(cols.cells(None, Some("p")), "-     p      ");
    }

    #[test]
    fn the_runner_is_named_only_when_another_daemon_runs_the_row() {
        assert_eq!(host_text(Some(&host("a", None))), "a");
        assert_eq!(host_text(Some(&host("a", Some("a")))), "a");
        assert_eq!(host_text(Some(&host("a", Some("b")))), "a→b");
        assert_eq!(host_text(None), "-");
    }

    #[test]
    fn control_characters_in_a_host_id_are_escaped() {
        let text = host_text(Some(&host("evil\u{1b}[2J", None)));
        assert!(!text.contains('\u{1b}'), "{text:?}");
    }
}

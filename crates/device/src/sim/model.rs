//! Lookups over the state shared by screens and commands.

use super::state::{App, AppRole, Contact, Event, SimState, Thread};

/// Digits of a phone number, with a leading `+` kept.
pub(crate) fn normalize_number(number: &str) -> String {
    let trimmed = number.trim();
    let digits: String = trimmed.chars().filter(char::is_ascii_digit).collect();
    if trimmed.starts_with('+') {
        format!("+{digits}")
    } else {
        digits
    }
}

/// Whether two numbers name the same line: equal digits, or (with at least 7 digits each)
/// one ends with the other (national vs. international spelling).
pub(crate) fn numbers_match(a: &str, b: &str) -> bool {
    let a = normalize_number(a);
    let b = normalize_number(b);
    let a = a.trim_start_matches('+');
    let b = b.trim_start_matches('+');
    if a.is_empty() || b.is_empty() {
        return false;
    }
    if a == b {
        return true;
    }
    let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
    let short = short.trim_start_matches('0');
    short.len() >= 7 && long.ends_with(short)
}

/// Whether `number` contains the digits of `q` (both normalised; a lone `+` matches nothing).
pub(crate) fn normalize_contains(number: &str, q: &str) -> bool {
    let n = normalize_number(number);
    let q = normalize_number(q);
    !q.trim_start_matches('+').is_empty() && n.contains(q.trim_start_matches('+'))
}

/// Whether `text` looks like a phone number (digits, spaces, `+-()`, at least 3 digits).
pub(crate) fn looks_like_number(text: &str) -> bool {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    digits >= 3
        && text.chars().all(|c| {
            c.is_ascii_digit() || matches!(c, '+' | '-' | ' ' | '(' | ')' | '.' | '*' | '#')
        })
}

/// Case-insensitive substring match.
pub(crate) fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// A shortened single-line preview.
pub(crate) fn snippet(text: &str, max: usize) -> String {
    let line = text.replace('\n', " ");
    if line.chars().count() <= max {
        line
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

impl SimState {
    /// The UTC offset in minutes.
    pub(crate) fn offset(&self) -> i32 {
        self.clock.utc_offset_minutes
    }

    /// Screen width and height as `i32`.
    pub(crate) fn screen(&self) -> (i32, i32) {
        (
            i32::try_from(self.device.screen.width).unwrap_or(1080),
            i32::try_from(self.device.screen.height).unwrap_or(2400),
        )
    }

    pub(crate) fn app(&self, package: &str) -> Option<&App> {
        self.apps.iter().find(|a| a.package == package)
    }

    pub(crate) fn app_by_role(&self, role: AppRole) -> Option<&App> {
        self.apps.iter().find(|a| a.role == Some(role))
    }

    pub(crate) fn contact(&self, id: i64) -> Option<&Contact> {
        self.contacts.iter().find(|c| c.id == id)
    }

    pub(crate) fn contact_for_number(&self, number: &str) -> Option<&Contact> {
        self.contacts
            .iter()
            .find(|c| c.phones.iter().any(|p| numbers_match(&p.number, number)))
    }

    /// The contact name for a number, else the number itself.
    pub(crate) fn name_for_number(&self, number: &str) -> String {
        self.contact_for_number(number)
            .map_or_else(|| number.to_string(), |c| c.name.clone())
    }

    pub(crate) fn thread(&self, id: i64) -> Option<&Thread> {
        self.threads.iter().find(|t| t.id == id)
    }

    pub(crate) fn thread_for_number(&self, number: &str) -> Option<&Thread> {
        self.threads
            .iter()
            .find(|t| numbers_match(&t.address, number))
    }

    /// What the Messages app calls a thread.
    pub(crate) fn thread_name(&self, thread: &Thread) -> String {
        if let Some(contact) = self.contact_for_number(&thread.address) {
            contact.name.clone()
        } else if let Some(name) = &thread.display_name {
            name.clone()
        } else {
            thread.address.clone()
        }
    }

    pub(crate) fn event(&self, id: i64) -> Option<&Event> {
        self.events.iter().find(|e| e.id == id)
    }

    /// Hands out a fresh id.
    pub(crate) fn fresh_id(&mut self) -> i64 {
        if self.next_id <= 0 {
            self.next_id = self.max_id() + 1;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn max_id(&self) -> i64 {
        let ids = self
            .contacts
            .iter()
            .map(|c| c.id)
            .chain(self.calendars.iter().map(|c| c.id))
            .chain(self.events.iter().map(|e| e.id))
            .chain(self.threads.iter().map(|t| t.id))
            .chain(
                self.threads
                    .iter()
                    .flat_map(|t| t.messages.iter().map(|m| m.id)),
            )
            .chain(self.calls.iter().map(|c| c.id))
            .chain(self.alarms.iter().map(|a| a.id))
            .chain(self.notes.iter().map(|n| n.id))
            .chain(self.shares.iter().map(|s| s.id))
            .chain(self.drafts.iter().map(|d| d.id))
            .chain(self.photos.iter().map(|p| p.id));
        ids.max().unwrap_or(0).max(0)
    }
}

mod continuity;
mod dentist;
mod recovery;
mod reports;
mod simulate;
mod store;
mod support;
mod transitions;

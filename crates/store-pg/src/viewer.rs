//! Opening the shared store to look at it: what the operator's offline commands use
//! (`openphone audit verify|head|export`, `openphone store stats`, `openphone fleet`).
//!
//! A viewer is not a daemon of the fleet. It connects as a daemon does (same URL checks, TLS,
//! password, session settings) but takes no host lock, writes no `fleet_hosts` row and never
//! migrates: the one-writer-per-host rule stays with the daemons, and a viewer may run beside
//! the daemon of the same `host_id`. Its sessions are read only at the server
//! (`default_transaction_read_only`), and [`PgStore::write`] refuses before reaching them, with
//! an error saying writes go through a daemon. A schema older or newer than this build's is
//! refused, naming both versions (a viewer cannot migrate it, and reading a newer one would
//! misread it).

use std::sync::Arc;

use openphone_store::{Result, StoreError};
use postgres::Client;

use crate::error::PgContext;
use crate::migrate::PG_SCHEMA_VERSION;
use crate::{PgConfig, PgStore, off_runtime, pool};

/// What a write on a viewer answers.
pub(crate) fn refused(op: &'static str, id: &str) -> StoreError {
    StoreError::Commit {
        op,
        id: id.to_owned(),
        detail: "this store was opened to view the fleet (`PgStore::open_viewer`, as the \
                 offline commands do): it does not write; writes go through a daemon \
                 (`openphone serve`)"
            .into(),
    }
}

impl PgStore {
    /// Opens the shared store read-only, as a viewer: no host lock, no `fleet_hosts` row, no
    /// migration (a schema other than [`PG_SCHEMA_VERSION`] is refused, naming it). Reads
    /// work as on a daemon's store ([`PgStore::host_id`] is `config.host_id`: the chain
    /// "this host" means); every write is refused with [`StoreError::Commit`].
    pub fn open_viewer(config: &PgConfig) -> Result<PgStore> {
        off_runtime("open_viewer", &config.host_id, || open_here(config))
    }

    /// Whether this store was opened with [`PgStore::open_viewer`].
    pub fn is_viewer(&self) -> bool {
        self.viewer
    }
}

fn open_here(config: &PgConfig) -> Result<PgStore> {
    let mut resolved = config.resolve()?;
    // Read only at the server too, for every connection the pool makes (reconnects included).
    let options = match resolved.pg.get_options() {
        Some(given) if !given.trim().is_empty() => {
            format!("{given} -c default_transaction_read_only=on")
        }
        Some(_) | None => "-c default_transaction_read_only=on".to_owned(),
    };
    resolved.pg.options(&options);
    let connector = Arc::new(pool::Connector::new(resolved, config));
    let target = connector.target().to_owned();
    let mut first = connector.connect()?;
    check_schema(&mut first, &target)?;
    // The pool's writer thread gets this connection and never a job: `PgStore::write` refuses
    // on a viewer before handing anything over, so it never reconnects (nor takes a host lock).
    let readers = (0..config.readers.max(1))
        .map(|_| connector.connect())
        .collect::<Result<Vec<_>>>()?;
    let pool = pool::Pool::start(connector, first, readers)?;
    Ok(PgStore {
        host_id: config.host_id.clone(),
        label: config.label.clone(),
        data_dir: config.data_dir.clone(),
        schema: config.schema.clone(),
        target,
        migrated: Vec::new(),
        pool,
        viewer: true,
    })
}

/// Refuses a database without OpenPhone's schema, or with another version of it.
fn check_schema(client: &mut Client, target: &str) -> Result<()> {
    const OP: &str = "open_viewer.schema";
    let row = client
        .query_one(
            "SELECT current_schema()::text, to_regclass('schema_migrations') IS NOT NULL",
            &[],
        )
        .ctx(OP, target)?;
    let schema: Option<String> = row.get(0);
    let Some(schema) = schema else {
        return Err(StoreError::Invalid {
            what: "PostgreSQL schema",
            detail: format!(
                "{target}: no schema on the search path exists (set search_path, or create \
                 the schema)"
            ),
        });
    };
    if !row.get::<_, bool>(1) {
        return Err(StoreError::Invalid {
            what: "PostgreSQL store",
            detail: format!(
                "{target} (schema {schema:?}) holds no OpenPhone store yet: no daemon has \
                 opened it. Start one with this `[store] url` (it creates the schema), then \
                 look again"
            ),
        });
    }
    let found: i64 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .ctx(OP, target)?
        .get(0);
    if found > PG_SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: PG_SCHEMA_VERSION,
        });
    }
    if found < PG_SCHEMA_VERSION {
        return Err(StoreError::Invalid {
            what: "PostgreSQL store",
            detail: format!(
                "{target} (schema {schema:?}) is at schema version {found}, older than this \
                 build's {PG_SCHEMA_VERSION}; a viewer does not migrate: start a daemon of \
                 this build on it first (it migrates), then look again"
            ),
        });
    }
    Ok(())
}

/// `url` as shown to people: `postgres://host:port/dbname`, without the user, any password
/// and the query options; `<not a postgres:// URL>` for anything else (a `key=value` string).
pub fn display_url(url: &str) -> String {
    let url = url.trim();
    if !crate::config::is_postgres_url(url) {
        // A `key=value` string (or another scheme) may hold a password anywhere: show none of it.
        return "<not a postgres:// URL>".to_owned();
    }
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::display_url;

    #[test]
    fn display_url_drops_the_user_the_password_and_the_options() {
        assert_eq!(
            display_url("postgres://openphone@127.0.0.1:5432/fleet?sslmode=require"),
            "postgres://127.0.0.1:5432/fleet"
        );
        assert_eq!(
            display_url("postgresql://u:secret@db.example:5432/x"),
            "postgresql://db.example:5432/x"
        );
        assert_eq!(display_url("postgres://db/x"), "postgres://db/x");
        assert_eq!(
            display_url("postgres://u@%2Fvar%2Frun%2Fpostgresql/x"),
            "postgres://%2Fvar%2Frun%2Fpostgresql/x"
        );
    }

    #[test]
    fn display_url_shows_nothing_of_a_key_value_connection_string() {
        for url in [
            "host=db user=op password=hunter2 dbname=x",
            "mysql://op:hunter2@db/x",
            "hunter2",
        ] {
            assert_eq!(display_url(url), "<not a postgres:// URL>");
        }
    }
}

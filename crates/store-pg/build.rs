//! The PostgreSQL conformance suite (`tests/conformance.rs`) needs a server: it is compiled in
//! when `OPENPHONE_TEST_PG_URL` names one (`bash tests/postgres/cluster.sh start`, as `.ci/run`
//! does), and otherwise left out with a warning saying so — never run against nothing.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pg_conformance)");
    println!("cargo::rerun-if-env-changed=OPENPHONE_TEST_PG_URL");
    match std::env::var("OPENPHONE_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => println!("cargo::rustc-cfg=pg_conformance"),
        _ => println!(
            "cargo::warning=PostgreSQL conformance suite skipped: OPENPHONE_TEST_PG_URL is not set \
             (start a server with `bash tests/postgres/cluster.sh start` and export its url)"
        ),
    }
}

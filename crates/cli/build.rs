//! Build script of `openphone`: one opt-in link setting for packaged builds.
//!
//! `OPENPHONE_LINK_ORDER=<file>`: a symbol-ordering file (one symbol a line) handed to the
//! linker (`--symbol-ordering-file`, LLD — Rust's default linker on x86_64 Linux and the
//! Android NDK's), which places the functions the daemon runs at start-up and at idle side by
//! side. The kernel maps a binary's code 64 KiB around each page fault (fault-around), so
//! start-up code scattered over the whole text segment keeps most of it resident; grouped, it
//! keeps a few MB (docs/building.md, "Memory at idle", has the figures and how the file is
//! made). The symbols named must be those of the build being linked: the file is made from a
//! build of the same commit and profile.
//!
//! `OPENPHONE_LINK_RELR=1`: packed relative relocations (`-z pack-relative-relocs`): the
//! 1.6 MB `.rela.dyn` table the dynamic loader reads at every start becomes a few KB. The
//! binary then needs glibc 2.36 or later (Android: API 28 or later), so it is not the default.
//!
//! Both unset (the default), the link is cargo's.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=OPENPHONE_LINK_RELR");
    if std::env::var_os("OPENPHONE_LINK_RELR").is_some_and(|v| v == "1") {
        println!("cargo:rustc-link-arg-bin=openphone=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-env-changed=OPENPHONE_LINK_ORDER");
    let Some(file) = std::env::var_os("OPENPHONE_LINK_ORDER") else {
        return;
    };
    if file.is_empty() {
        return;
    }
    let path = Path::new(&file);
    if !path.is_file() {
        println!(
            "cargo:warning=OPENPHONE_LINK_ORDER names {}, which is not a file; linking without it",
            path.display()
        );
        return;
    }
    let Ok(path) = std::path::absolute(path) else {
        println!("cargo:warning=OPENPHONE_LINK_ORDER: cannot make its path absolute");
        return;
    };
    println!("cargo:rerun-if-changed={}", path.display());
    println!(
        "cargo:rustc-link-arg-bin=openphone=-Wl,--symbol-ordering-file={}",
        path.display()
    );
    // Symbols of another build, or inlined away, are skipped without a warning each.
    println!("cargo:rustc-link-arg-bin=openphone=-Wl,--no-warn-symbol-ordering");
}

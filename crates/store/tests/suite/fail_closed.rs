//! Opening fails closed (issue 11, item 3): a damaged database is refused and left as it was,
//! never replaced by a fresh one; a new database appears only complete. (Unwritable files and
//! directories are tested through the real binary in the CLI suite, where a root test run can
//! drop its permission override.)

use openphone_store::{Store, StoreError};

use super::support::{data_dir, open, temp};

fn damaged(result: Result<Store, StoreError>) -> String {
    match result {
        Err(e @ StoreError::Damaged { .. }) => e.to_string(),
        other => panic!("expected Damaged, got {other:?}"),
    }
}

#[test]
fn an_empty_database_file_is_refused_and_left_alone() {
    let dir = temp();
    std::fs::create_dir_all(data_dir(&dir)).unwrap();
    let db = data_dir(&dir).join("openphone.db");
    std::fs::write(&db, b"").unwrap();
    let message = damaged(Store::open(data_dir(&dir)));
    assert!(message.contains(&db.display().to_string()), "{message}");
    assert!(message.contains("empty"), "{message}");
    assert!(message.contains("restore it from a backup"), "{message}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "not replaced");
    // The offline reader refuses it too.
    damaged(Store::open_read_only(data_dir(&dir)));
}

#[test]
fn a_file_that_is_not_a_database_is_refused() {
    let dir = temp();
    std::fs::create_dir_all(data_dir(&dir)).unwrap();
    let db = data_dir(&dir).join("openphone.db");
    let junk = vec![0x5a_u8; 8192];
    std::fs::write(&db, &junk).unwrap();
    damaged(Store::open(data_dir(&dir)));
    assert_eq!(std::fs::read(&db).unwrap(), junk, "not replaced");
}

#[test]
fn a_database_cut_short_is_refused() {
    let dir = temp();
    {
        let store = open(&dir);
        for i in 0..400 {
            store
                .set_setting(&format!("key-{i}"), &serde_json::json!("x".repeat(200)), i)
                .unwrap();
        }
    }
    let db = data_dir(&dir).join("openphone.db");
    let len = std::fs::metadata(&db).unwrap().len();
    assert!(len > 16 * 4096, "the database has many pages ({len} bytes)");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    damaged(Store::open(data_dir(&dir)));
    assert_eq!(
        std::fs::metadata(&db).unwrap().len(),
        len / 2,
        "not replaced"
    );
}

#[test]
fn a_new_database_is_complete_when_it_appears() {
    let dir = temp();
    drop(open(&dir));
    let names: Vec<String> = std::fs::read_dir(data_dir(&dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"openphone.db".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.contains(".new") || n.contains("write-probe")),
        "no staging or probe file left: {names:?}"
    );
    // And it opens again with its data.
    let store = Store::open(data_dir(&dir)).unwrap();
    assert!(store.verify_audit().unwrap().is_intact());
}

use super::*;

#[test]
fn manager_is_id_mod_nodes() {
    let s = SyncState::new(0, 3);
    assert_eq!(s.manager(7), 1);
}

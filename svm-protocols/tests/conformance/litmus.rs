//! Litmus tests of racy programs (message passing, store buffering, IRIW): only for protocols
//! that promise sequential consistency to racy programs, except where a test says otherwise.

use super::*;

/// Message passing: data then flag; a reader that saw the flag must see the data.
pub fn message_passing<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    let mut first_reads = BTreeMap::new();
    let mut observer = BTreeMap::new();
    for seed in 0..seeds() {
        let same_page = seed % 2 == 0;
        let (data, flag) = if same_page {
            (addr(1, 0), addr(1, 5))
        } else {
            (addr(1, 0), addr(2, 0))
        };
        let mut c = cluster::<C>(s, 3, seed);
        c.spawn(0, publish(data, flag).to_vec());
        // A possibly stale early copy first, which must be invalidated in time.
        let mut r = vec![Op::Load { addr: data, reg: 0 }];
        r.extend(consume(data, flag, 1));
        let reader = c.spawn(1, r);
        let obs = c.spawn(
            2,
            vec![
                Op::Load { addr: flag, reg: 0 },
                Op::Load { addr: data, reg: 1 },
            ],
        );
        run(s, &mut c, "message passing");
        let r = c.log(reader);
        assert_eq!(
            r[1], 42,
            "{} / message passing, seed {seed}: reader saw the flag but not the data",
            s.name
        );
        let o = c.log(obs);
        assert!(
            o[0] == 0 || o[1] == 42,
            "{} / message passing, seed {seed}: observer saw flag, data {o:?}",
            s.name
        );
        *first_reads.entry(r[0]).or_insert(0) += 1;
        *observer.entry(o.to_vec()).or_insert(0) += 1;
    }
    assert_explored(s, "message passing (early read)", &first_reads, 2);
    assert_explored(s, "message passing (observer)", &observer, 2);
}

/// Store buffering (Dekker): x=1; r1=y ‖ y=1; r2=x never gives r1 = r2 = 0.
pub fn store_buffering<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    for same_page in [false, true] {
        let mut outcomes = BTreeMap::new();
        for seed in 0..seeds() {
            let (x, y) = if same_page {
                (addr(1, 1), addr(1, 6))
            } else {
                (addr(1, 1), addr(2, 6))
            };
            let mut c = cluster::<C>(s, 3, seed);
            let warm = seed % 3 == 0;
            let prog = |mine: u64, other: u64| {
                let mut p = Vec::new();
                if warm {
                    p.push(Op::Load {
                        addr: other,
                        reg: 1,
                    });
                    p.push(Op::Load { addr: mine, reg: 1 });
                }
                p.push(Op::Store {
                    addr: mine,
                    value: 1,
                });
                p.push(Op::Load {
                    addr: other,
                    reg: 0,
                });
                p
            };
            let t0 = c.spawn(0, prog(x, y));
            let t1 = c.spawn(1, prog(y, x));
            run(s, &mut c, "store buffering");
            let (r1, r2) = (*c.log(t0).last().unwrap(), *c.log(t1).last().unwrap());
            assert!(
                r1 == 1 || r2 == 1,
                "{} / store buffering (same page: {same_page}), seed {seed}: r1 = r2 = 0",
                s.name
            );
            *outcomes.entry((r1, r2)).or_insert(0) += 1;
        }
        assert_explored(
            s,
            &format!("store buffering (same page: {same_page})"),
            &outcomes,
            2,
        );
    }
}

/// Independent reads of independent writes: two readers never see the writes in opposite
/// orders.
pub fn iriw<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    let mut outcomes = BTreeMap::new();
    for seed in 0..seeds() {
        let (x, y) = (addr(1, 2), addr(2, 3));
        let mut c = cluster::<C>(s, 4, seed);
        c.spawn(0, vec![Op::Store { addr: x, value: 1 }]);
        c.spawn(1, vec![Op::Store { addr: y, value: 1 }]);
        let a = c.spawn(
            2,
            vec![Op::Load { addr: x, reg: 0 }, Op::Load { addr: y, reg: 1 }],
        );
        let b = c.spawn(
            3,
            vec![Op::Load { addr: y, reg: 0 }, Op::Load { addr: x, reg: 1 }],
        );
        run(s, &mut c, "IRIW");
        let (ra, rb) = (c.log(a).to_vec(), c.log(b).to_vec());
        assert!(
            !(ra == [1, 0] && rb == [1, 0]),
            "{} / IRIW, seed {seed}: reader 2 saw x before y, reader 3 saw y before x",
            s.name
        );
        *outcomes.entry((ra, rb)).or_insert(0) += 1;
    }
    assert_explored(s, "IRIW", &outcomes, 3);
}

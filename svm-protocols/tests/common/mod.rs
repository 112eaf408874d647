//! Building blocks of the simulator programs shared by the integration tests of this crate
//! (`conformance/`, `bounded_visibility.rs`, `home_migration.rs`); not every file uses all.
#![allow(dead_code)]

use svm_core::protocol::{NodeId, Protocol};
use svm_protocols::sim::Op;

/// Words per simulated page (pages of 64 bytes keep programs small).
pub const PAGE_WORDS: usize = 8;
/// Loads a spin makes before the simulator calls it a hang.
pub const SPIN: u32 = 100_000;

/// The byte address of word `word` of page `page`.
pub fn addr(page: u64, word: usize) -> u64 {
    page * (8 * PAGE_WORDS) as u64 + 8 * word as u64
}

/// Spin until the word at `addr` holds `value`.
pub fn spin(addr: u64, value: u64) -> Op {
    Op::SpinUntilEq {
        addr,
        value,
        max_loads: SPIN,
    }
}

/// The writer's half of message passing: the datum 42, then the flag 1.
pub fn publish(data: u64, flag: u64) -> [Op; 2] {
    [
        Op::Store {
            addr: data,
            value: 42,
        },
        Op::Store {
            addr: flag,
            value: 1,
        },
    ]
}

/// `mem[counter] += 1` under lock `lock`.
pub fn locked_increment(lock: u64, counter: u64) -> [Op; 5] {
    [
        Op::Lock(lock),
        Op::Load {
            addr: counter,
            reg: 0,
        },
        Op::AddImm { reg: 0, imm: 1 },
        Op::StoreReg {
            addr: counter,
            reg: 0,
        },
        Op::Unlock(lock),
    ]
}

/// The three protocols as they start by default.
pub fn sc_sw(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScSingleWriter::new())
}

pub fn sc_mw(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new())
}

pub fn scope(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::Scope::new())
}

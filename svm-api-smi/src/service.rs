//! The message service of this process: a thread that handles the runtime's own messages
//! which no SMI call waits for — region callbacks (another process connected to or
//! disconnected from a region, or freed one this process imported) and watchdog heartbeats.

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::time::Duration;

use svm_core::api;

use crate::consts::*;
use crate::table::{Flag, Origin};
use crate::{misc, region, smi, TAG_CB, TAG_HB};

/// Handles region callback messages (CONNECT/DISCONNECT from other processes) until the
/// runtime stops.
pub(crate) fn service_loop() {
    let Ok(s) = smi() else { return };
    while !s.stop.load(Ordering::Acquire) {
        let m = api::recv_message(
            |m| m.tag == TAG_CB || m.tag == TAG_HB,
            Some(Duration::from_millis(100)),
        );
        let Ok(Some(m)) = m else { continue };
        if m.tag == TAG_HB {
            misc::heartbeat(m.from as usize, m.data.first() == Some(&1));
            continue;
        }
        if m.data.len() < 8 {
            continue;
        }
        let reason = m.data[0] as c_int;
        let to_importer = m.data[1] == 1;
        let key32 = u32::from_le_bytes([m.data[4], m.data[5], m.data[6], m.data[7]]) as u64;
        let from = m.from as usize;
        // Find the region concerned and its callback; update the importer list.
        let hit = {
            let mut st = s.st();
            let r = st.regions.iter_mut().find(|r| {
                if to_importer {
                    r.import
                        .is_some_and(|(o, k)| o == from && (k as u32 as u64) == key32)
                } else {
                    r.export.is_some_and(|k| (k as u32 as u64) == key32)
                }
            });
            r.map(|r| {
                if !to_importer {
                    if reason == CB_REASON_CONNECT {
                        r.importers.push(from);
                    } else {
                        r.importers.retain(|p| *p != from);
                    }
                } else {
                    r.connected = false;
                }
                (
                    r.id,
                    if r.flags.has(Flag::Callback) {
                        r.cb
                    } else {
                        None
                    },
                )
            })
        };
        let Some((id, Some(cb))) = hit else { continue };
        let action = cb(id, reason);
        if action & CB_ACTION_TERMINATE != 0 {
            api::abort_job(
                1,
                &format!("process {} ended the job from a region callback", s.me),
            );
        }
        if action & CB_ACTION_FREEREG != 0 {
            let r = {
                let mut st = s.st();
                st.regions
                    .iter()
                    .position(|r| r.id == id)
                    .map(|i| st.regions.remove(i))
            };
            if let Some(r) = r {
                if r.origin != Origin::Collective {
                    let _ = region::release_region(s, r);
                }
            }
        }
    }
}

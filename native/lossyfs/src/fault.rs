//! Injected disk errors: while a fault is set, chosen operations fail with one errno.
//!
//! As unreliablefs and petardfs do (an errno per operation class, optionally per path), and
//! unlike lazyfs, whose faults are lost or torn writes. Control commands (main.rs):
//!   fault <preset> [PATH]        eio-write | eio-read | enospc
//!   fault <ERRNO> <OPS> [PATH]   ERRNO: EIO, ENOSPC, EROFS or a number; OPS: a comma list of
//!                                read, write, truncate, fallocate, fsync, create, mkdir, rename, remove
//!   clear-fault                  back to a healthy disk; answers what was injected
//! PATH restricts the fault to names under that path relative to the mount ("" = everything).
//! The check costs one branch on the hot path while no fault is set.

use std::time::Instant;

pub const READ: u32 = 1 << 0;
pub const WRITE: u32 = 1 << 1;
pub const TRUNCATE: u32 = 1 << 2;
pub const FALLOCATE: u32 = 1 << 3;
pub const FSYNC: u32 = 1 << 4;
pub const CREATE: u32 = 1 << 5;
pub const MKDIR: u32 = 1 << 6;
pub const RENAME: u32 = 1 << 7;
pub const REMOVE: u32 = 1 << 8;

pub const OPS: [(&str, u32); 9] = [("read", READ), ("write", WRITE), ("truncate", TRUNCATE), ("fallocate", FALLOCATE),
                                   ("fsync", FSYNC), ("create", CREATE), ("mkdir", MKDIR), ("rename", RENAME),
                                   ("remove", REMOVE)];

/// The presets the harness uses (nemesis/disk.py): what a failing or full disk refuses.
/// - eio-write: a disk whose writes fail: every change of data or names, and fsync.
/// - eio-read: a disk whose reads fail (the kernel's page cache of the mount is dropped as the
///   fault starts, so that reads reach the disk instead of being served from memory).
/// - enospc: a full disk: what needs a new block or inode (data written, space reserved, a new
///   name); overwrites in place need one too for simplicity; truncate, rename, remove and fsync
///   still work, as on ext4 with nothing delayed.
pub const PRESETS: [(&str, i32, u32); 3] = [
    ("eio-write", libc::EIO, WRITE | TRUNCATE | FALLOCATE | FSYNC | CREATE | MKDIR | RENAME | REMOVE),
    ("eio-read", libc::EIO, READ),
    ("enospc", libc::ENOSPC, WRITE | FALLOCATE | CREATE | MKDIR),
];

pub struct Fault {
    pub name: String,
    pub errno: i32,
    pub ops: u32,
    pub path: String, // relative to the mount, no leading '/'; "" = everything
    pub since: Instant,
    pub hits: [u64; 9], // per OPS entry: operations refused
    pub first_hit_s: Option<f64>,
}

fn errno_of(word: &str) -> Option<i32> {
    match word.to_ascii_uppercase().as_str() {
        "EIO" => Some(libc::EIO),
        "ENOSPC" => Some(libc::ENOSPC),
        "EROFS" => Some(libc::EROFS),
        "EDQUOT" => Some(libc::EDQUOT),
        other => other.parse().ok().filter(|n| *n > 0),
    }
}

pub fn errno_name(errno: i32) -> String {
    match errno {
        libc::EIO => "EIO".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::EROFS => "EROFS".into(),
        libc::EDQUOT => "EDQUOT".into(),
        n => n.to_string(),
    }
}

impl Fault {
    /// Parse the words after `fault`; Err names what is wrong.
    pub fn parse(words: &[&str]) -> Result<Fault, String> {
        let (name, errno, ops, rest) = match words {
            [first, rest @ ..] if PRESETS.iter().any(|p| p.0 == *first) => {
                let p = PRESETS.iter().find(|p| p.0 == *first).unwrap();
                (first.to_string(), p.1, p.2, rest)
            }
            [e, ops, rest @ ..] => {
                let errno = errno_of(e).ok_or_else(|| format!("unknown errno {e}: use EIO, ENOSPC, EROFS, EDQUOT or a number"))?;
                let mut mask = 0;
                for op in ops.split(',') {
                    mask |= OPS.iter().find(|o| o.0 == op).map(|o| o.1)
                        .ok_or_else(|| format!("unknown operation {op}: use {}", OPS.map(|o| o.0).join(", ")))?;
                }
                (format!("{} on {}", errno_name(errno), ops), errno, mask, rest)
            }
            _ => return Err(format!("usage: fault <{}> [PATH] | fault <ERRNO> <OPS> [PATH]",
                                    PRESETS.map(|p| p.0).join("|"))),
        };
        if rest.len() > 1 {
            return Err("one PATH at most".into());
        }
        let path = rest.first().map(|p| p.trim_matches('/').to_string()).unwrap_or_default();
        Ok(Fault { name, errno, ops, path, since: Instant::now(), hits: [0; 9], first_hit_s: None })
    }

    /// Whether `op` on the name at `rel` (relative to the mount) is refused.
    pub fn applies(&self, op: u32, rel: Option<&std::path::Path>) -> bool {
        if self.ops & op == 0 {
            return false;
        }
        if self.path.is_empty() {
            return true;
        }
        rel.map_or(false, |r| r.starts_with(&self.path))
    }

    pub fn count(&mut self, op: u32) {
        if let Some(i) = OPS.iter().position(|o| o.1 == op) {
            self.hits[i] += 1;
        }
        self.first_hit_s.get_or_insert(self.since.elapsed().as_secs_f64());
    }

    pub fn json(&self) -> String {
        let hits: Vec<String> = OPS.iter().zip(self.hits.iter()).filter(|(_, n)| **n > 0)
            .map(|(o, n)| format!("\"{}\": {}", o.0, n)).collect();
        let ops: Vec<String> = OPS.iter().filter(|o| self.ops & o.1 != 0).map(|o| format!("\"{}\"", o.0)).collect();
        format!("{{\"name\": \"{}\", \"errno\": \"{}\", \"ops\": [{}], \"path\": \"{}\", \"active_s\": {:.3}, \
                 \"first_hit_s\": {}, \"injected\": {{{}}}, \"injected_total\": {}}}",
                self.name, errno_name(self.errno), ops.join(", "), self.path.replace('"', "'"),
                self.since.elapsed().as_secs_f64(), self.first_hit_s.map_or("null".into(), |s| format!("{s:.3}")),
                hits.join(", "), self.hits.iter().sum::<u64>())
    }
}

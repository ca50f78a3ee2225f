//! What a power cut took (`State::drop_unsynced`), as the `drop` command answers it.

use std::ffi::OsStr;

pub struct DropReport {
    pub dropped_bytes: u64,
    pub dropped_files: u64,
    pub dropped_entries: u64,
    pub seconds: f64,
    /// What the cut took, by path under the mount (at most MAX_NAMES; `names_more` says how many
    /// were left off): the campaign's seed 33 lost partition directories whose names had never
    /// been fsynced, and only the counts were on record.
    pub names: Vec<Dropped>,
    pub names_more: u64,
}

/// One thing a drop took: an entry made since its directory's last fsync (`entry`), one removed
/// or renamed away since then and brought back (`restored`), a file whose name never reached the
/// disk (`vanished`, with its bytes), or a file's un-synced bytes (`bytes`).
pub struct Dropped {
    pub path: String,
    pub what: &'static str,
    pub bytes: u64,
}

pub const MAX_NAMES: usize = 200;

impl Dropped {
    pub fn rank(&self) -> u8 {
        match self.what {
            "entry" => 0,
            "restored" => 1,
            "vanished" => 2,
            _ => 3,
        }
    }
}

impl DropReport {
    pub fn names_json(&self) -> String {
        let items: Vec<String> = self.names.iter().map(|d| format!(
            "{{\"path\": {}, \"what\": \"{}\", \"bytes\": {}}}", json_string(&d.path), d.what, d.bytes)).collect();
        format!("[{}]", items.join(", "))
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn join(dir: &str, name: &OsStr) -> String {
    let name = name.to_string_lossy();
    if dir.ends_with('/') { format!("{dir}{name}") } else { format!("{dir}/{name}") }
}

//! lossyfs: mount `<backing>/live` at a mount point and remember what was never made durable.
//!
//!   lossyfs --backing DIR --mount DIR --control SOCKET [--label NAME] [--writeback-s N] [--ttl-ms MS]
//!
//! Control: one command per line on the unix socket, one JSON line back:
//!   ping | stats | sync-all | drop (power loss: discard every un-synced byte and entry)
//!   fault <eio-write|eio-read|enospc|ERRNO OPS> [PATH] | clear-fault (disk errors, fault.rs)
//! `--writeback-s N` models the kernel's writeback: a file's data, or a directory's entries,
//! dirty for N seconds have reached the disk. Without it nothing un-synced survives a drop.

mod fault;
mod fs;
mod refusal;
mod report;
mod state;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuser::{MountOption, Notifier};

use crate::fs::LossyFs;
use crate::state::State;

fn usage(problem: &str) -> ! {
    eprintln!("lossyfs: {problem}\nusage: lossyfs --backing DIR --mount DIR --control SOCKET [--label NAME] [--writeback-s N] [--ttl-ms MS]");
    std::process::exit(2);
}

/// Drop the kernel's page cache of every file, so that reads reach this process (and a read
/// fault) instead of being served from memory. Sent without the state lock: the kernel may
/// write back mmap'd pages through us while it invalidates them.
fn drop_page_cache(state: &Arc<Mutex<State>>, notifier: &Notifier) -> usize {
    let files: Vec<u64> = {
        let st = state.lock().unwrap_or_else(|p| p.into_inner());
        st.nodes.iter().filter(|(_, n)| n.kind == state::Kind::File).map(|(i, _)| *i).collect()
    };
    files.iter().filter(|ino| notifier.inval_inode(**ino, 0, 0).is_ok()).count()
}

fn answer(state: &Arc<Mutex<State>>, notifier: &Notifier, command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.first() == Some(&"fault") {
        let fault = match fault::Fault::parse(&words[1..]) {
            Ok(f) => f,
            Err(e) => return format!("{{\"ok\": false, \"error\": \"{}\"}}", e.replace('"', "'")),
        };
        let reads = fault.ops & fault::READ != 0;
        let json = fault.json();
        state.lock().unwrap_or_else(|p| p.into_inner()).fault = Some(fault);
        let invalidated = if reads { drop_page_cache(state, notifier) } else { 0 };
        return format!("{{\"ok\": true, \"fault\": {json}, \"page_cache_dropped_files\": {invalidated}}}");
    }
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    match command {
        "ping" => format!("{{\"ok\": true, \"faults\": [{}]}}",
                          fault::PRESETS.map(|p| format!("\"{}\"", p.0)).join(", ")),
        "stats" => st.stats_json(),
        "clear-fault" => match st.fault.take() {
            Some(f) => format!("{{\"ok\": true, \"cleared\": {}}}", f.json()),
            None => "{\"ok\": true, \"cleared\": null}".to_string(),
        },
        "sync-all" => {
            st.sync_all();
            "{\"ok\": true}".to_string()
        }
        "drop" => match st.drop_unsynced() {
            Ok(r) => format!(
                "{{\"ok\": true, \"dropped_bytes\": {}, \"dropped_files\": {}, \"dropped_entries\": {}, \"seconds\": {:.4}, \
                 \"dropped_names\": {}, \"dropped_names_more\": {}}}",
                r.dropped_bytes, r.dropped_files, r.dropped_entries, r.seconds, r.names_json(), r.names_more),
            Err(e) => format!("{{\"ok\": false, \"error\": \"drop failed: {}\"}}", e.to_string().replace('"', "'")),
        },
        other => format!("{{\"ok\": false, \"error\": \"unknown command {:?}\"}}", other.replace('"', "'")),
    }
}

fn serve(listener: UnixListener, state: Arc<Mutex<State>>, notifier: Notifier) {
    for stream in listener.incoming().flatten() {
        let (state, notifier) = (state.clone(), notifier.clone());
        std::thread::spawn(move || {
            let mut out: UnixStream = match stream.try_clone() { Ok(s) => s, Err(_) => return };
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let reply = answer(&state, &notifier, line.trim());
                if writeln!(out, "{reply}").is_err() {
                    return;
                }
            }
        });
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut backing, mut mount, mut control, mut label) = (None, None, None, "lossyfs".to_string());
    let (mut writeback, mut ttl_ms) = (None, 0u64);
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--backing" => backing = Some(PathBuf::from(value())),
            "--mount" => mount = Some(PathBuf::from(value())),
            "--control" => control = Some(PathBuf::from(value())),
            "--label" => label = value(),
            "--writeback-s" => writeback = Some(Duration::from_secs_f64(value().parse().unwrap_or_else(|_| usage("--writeback-s takes seconds")))),
            "--ttl-ms" => ttl_ms = value().parse().unwrap_or_else(|_| usage("--ttl-ms takes milliseconds")),
            _ => usage(&format!("unknown argument {flag}")),
        }
    }
    let backing = backing.unwrap_or_else(|| usage("--backing is required"));
    let mount = mount.unwrap_or_else(|| usage("--mount is required"));
    let control = control.unwrap_or_else(|| usage("--control is required"));
    let state = match State::new(backing, writeback) {
        Ok(s) => Arc::new(Mutex::new(s)),
        Err(e) => usage(&format!("cannot prepare the backing directory: {e}")),
    };
    let options = [MountOption::FSName(format!("lossyfs:{label}")), MountOption::Subtype("lossyfs".into()),
                   MountOption::AllowOther, MountOption::RW, MountOption::NoAtime];
    let fs = LossyFs { state: state.clone(), ttl: Duration::from_millis(ttl_ms) };
    let mut session = match fuser::Session::new(fs, &mount, &options) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lossyfs: cannot mount {}: {e}", mount.display());
            std::process::exit(3);
        }
    };
    let _ = std::fs::remove_file(&control);
    let listener = UnixListener::bind(&control).unwrap_or_else(|e| usage(&format!("cannot bind {}: {e}", control.display())));
    let (served, notifier) = (state.clone(), session.notifier());
    std::thread::spawn(move || serve(listener, served, notifier));
    if writeback.is_some() {
        let ticking = state.clone();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(200));
            ticking.lock().unwrap_or_else(|p| p.into_inner()).writeback_tick();
        });
    }
    eprintln!("lossyfs: mounted {} (writeback {:?})", mount.display(), writeback);
    if let Err(e) = session.run() {
        eprintln!("lossyfs: session ended: {e}");
    }
    let _ = std::fs::remove_file(&control);
}

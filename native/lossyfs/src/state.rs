//! The model: which bytes and which directory entries are durable, and how to go back to them.
//!
//! Every operation is applied at once to `backing/live` (so reads, mmap and stat are a plain
//! passthrough). What a power cut would lose is kept as an undo record:
//! - a file's data: its size at the last fsync (`durable_size`) and the original bytes of every
//!   range below it that was overwritten, truncated away or punched since (`undo`). Appends, the
//!   common case in Kafka, cost nothing to undo: the file is cut back to `durable_size`.
//! - a directory's entries: the name -> node map at its last fsync (`durable`). A node that left
//!   the live tree but is still named by some durable map (an un-synced unlink or rename-over) is
//!   parked in `backing/orphans/<ino>` instead of being deleted, so a drop can bring it back.
//! A drop rolls every file back, rebuilds the tree from the durable maps and gives every node a
//! fresh inode number, so that the kernel keeps no stale page or attribute of the old state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::report::{join, DropReport, Dropped, MAX_NAMES};

pub const ROOT: u64 = 1;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    File,
    Dir,
}

#[derive(Clone, Debug)]
pub enum Loc {
    Live { parent: u64, name: OsString },
    Orphan,
}

pub struct Node {
    pub kind: Kind,
    pub loc: Loc,
    pub children: BTreeMap<OsString, u64>,         // dirs: live entries
    pub durable: BTreeMap<OsString, u64>,          // dirs: entries at the last fsync of the dir
    pub refs: u32,                                 // how many durable maps name this node
    pub size: u64,                                 // files: live size
    pub durable_size: u64,                         // files: size at the last fsync
    pub undo: BTreeMap<u64, Vec<u8>>,              // files: original bytes below durable_size
    pub written: BTreeMap<u64, u64>,               // files: extents written since the last fsync
    pub dirty_since: Option<Instant>,              // first un-synced change (data or entries)
}

impl Node {
    fn new(kind: Kind, loc: Loc) -> Node {
        Node { kind, loc, children: BTreeMap::new(), durable: BTreeMap::new(), refs: 0, size: 0,
               durable_size: 0, undo: BTreeMap::new(), written: BTreeMap::new(), dirty_since: None }
    }
    /// Bytes written since the last fsync that are still in the file: what a cut takes. Space
    /// only reserved (Kafka sizes its index files to 10 MB up front) is not counted.
    pub fn dirty_bytes(&self) -> u64 {
        self.written.iter().filter(|(s, _)| **s < self.size).map(|(s, e)| (*e).min(self.size) - s).sum()
    }
    pub fn note_write(&mut self, start: u64, end: u64) {
        let (mut start, mut end) = (start, end);
        let overlapping: Vec<(u64, u64)> = self.written.range(..=end).rev()
            .take_while(|(_, e)| **e >= start).map(|(s, e)| (*s, *e)).collect();
        for (s, e) in overlapping {
            self.written.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.written.insert(start, end);
    }
    fn entries_dirty(&self) -> bool {
        self.kind == Kind::Dir && self.children != self.durable
    }
}

#[derive(Default, Clone)]
pub struct Counters {
    pub fsyncs: u64,
    pub fsyncdirs: u64,
    pub drops: u64,
    pub dropped_bytes: u64,
    pub dropped_files: u64,
    pub dropped_entries: u64,
    pub written_bytes: u64,
}

pub struct State {
    pub backing: PathBuf,
    pub nodes: HashMap<u64, Node>,
    pub next_ino: u64,
    pub generation: u64,
    pub handles: HashMap<u64, (u64, File)>,
    pub next_fh: u64,
    pub counters: Counters,
    pub writeback: Option<Duration>,
    pub fault: Option<crate::fault::Fault>, // an injected disk error (fault.rs), None when healthy
}

fn err(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl State {
    pub fn new(backing: PathBuf, writeback: Option<Duration>) -> io::Result<State> {
        fs::create_dir_all(backing.join("live"))?;
        let _ = fs::remove_dir_all(backing.join("orphans"));
        let _ = fs::remove_dir_all(backing.join("newlive"));
        fs::create_dir_all(backing.join("orphans"))?;
        let mut state = State { backing, nodes: HashMap::new(), next_ino: ROOT + 1, generation: 1,
                                handles: HashMap::new(), next_fh: 1, counters: Counters::default(), writeback, fault: None };
        state.scan()?;
        Ok(state)
    }

    /// A fresh node table from what is in `live`, all of it durable (the state at mount or after a drop).
    fn scan(&mut self) -> io::Result<()> {
        self.nodes.clear();
        let mut root = Node::new(Kind::Dir, Loc::Live { parent: 0, name: OsString::new() });
        root.refs = 1; // pinned
        self.nodes.insert(ROOT, root);
        let mut stack = vec![(ROOT, self.backing.join("live"))];
        while let Some((dir, path)) = stack.pop() {
            for entry in fs::read_dir(&path)? {
                let entry = entry?;
                let meta = entry.metadata()?;
                let kind = if meta.is_dir() { Kind::Dir } else { Kind::File };
                let ino = self.next_ino;
                self.next_ino += 1;
                let mut node = Node::new(kind, Loc::Live { parent: dir, name: entry.file_name() });
                node.refs = 1;
                if kind == Kind::File {
                    node.size = meta.len();
                    node.durable_size = meta.len();
                } else {
                    stack.push((ino, entry.path()));
                }
                self.nodes.insert(ino, node);
                let parent = self.nodes.get_mut(&dir).unwrap();
                parent.children.insert(entry.file_name(), ino);
                parent.durable.insert(entry.file_name(), ino);
            }
        }
        Ok(())
    }

    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let node = self.nodes.get(&ino)?;
        match &node.loc {
            _ if ino == ROOT => Some(self.backing.join("live")),
            Loc::Orphan => Some(self.backing.join("orphans").join(ino.to_string())),
            Loc::Live { parent, name } => Some(self.path(*parent)?.join(name)),
        }
    }

    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        self.nodes.get(&parent)?.children.get(name).copied()
    }

    pub fn add_child(&mut self, parent: u64, name: &OsStr, kind: Kind, size: u64) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Node::new(kind, Loc::Live { parent, name: name.to_owned() }));
        self.nodes.get_mut(&ino).unwrap().size = size;
        self.nodes.get_mut(&ino).unwrap().dirty_since = if size > 0 { Some(Instant::now()) } else { None };
        let p = self.nodes.get_mut(&parent).unwrap();
        p.children.insert(name.to_owned(), ino);
        p.dirty_since.get_or_insert(Instant::now());
        ino
    }

    /// Save the original bytes of [start, end) that lie below the durable size and are not saved yet.
    pub fn save_range(&mut self, ino: u64, start: u64, end: u64) -> Result<(), i32> {
        let path = self.path(ino).ok_or(libc::ENOENT)?;
        let node = self.nodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        let end = end.min(node.durable_size);
        if start >= end {
            return Ok(());
        }
        let mut gaps = Vec::new();
        let mut at = start;
        let first = node.undo.range(..start).next_back().map(|(s, _)| *s).unwrap_or(start);
        for (s, data) in node.undo.range(first..end) {
            let e = s + data.len() as u64;
            if e <= at {
                continue;
            }
            if *s > at {
                gaps.push((at, *s));
            }
            at = at.max(e);
        }
        if at < end {
            gaps.push((at, end));
        }
        if gaps.is_empty() {
            return Ok(());
        }
        let file = File::open(&path).map_err(err)?;
        for (s, e) in gaps {
            let mut buf = vec![0u8; (e - s) as usize];
            let mut got = 0;
            while got < buf.len() {
                // Bytes past the live end were saved when it was cut; a short read leaves zeros.
                let n = file.read_at(&mut buf[got..], s + got as u64).map_err(err)?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            node.undo.insert(s, buf);
        }
        Ok(())
    }

    pub fn touch(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.dirty_since.get_or_insert(Instant::now());
        }
    }

    pub fn sync_file(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            if node.kind == Kind::File {
                node.durable_size = node.size;
                node.undo.clear();
                node.written.clear();
                node.dirty_since = None;
            }
        }
    }

    /// fsync of a directory: its durable entries become its live entries.
    pub fn sync_dir(&mut self, ino: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else { return };
        if node.kind != Kind::Dir {
            return;
        }
        let new = node.children.clone();
        let old = std::mem::replace(&mut node.durable, new.clone());
        node.dirty_since = None;
        let mut released: Vec<u64> = old.values().copied().collect();
        for child in new.values() {
            if let Some(c) = self.nodes.get_mut(child) {
                c.refs += 1;
            }
        }
        // A node has one durable name: a rename between two directories reaches the disk whole
        // when either of them is synced, as one journal transaction would carry it.
        let named: HashSet<u64> = new.values().copied().collect();
        for (dir, other) in self.nodes.iter_mut() {
            if *dir != ino && other.kind == Kind::Dir {
                other.durable.retain(|_, child| if named.contains(child) { released.push(*child); false } else { true });
            }
        }
        for child in old.values().filter(|c| !named.contains(c)) {
            let Some(Loc::Live { parent, name }) = self.nodes.get(child).map(|n| n.loc.clone()) else { continue };
            if let Some(p) = self.nodes.get_mut(&parent) {
                if let Some(replaced) = p.durable.insert(name, *child) {
                    released.push(replaced);
                }
                self.nodes.get_mut(child).unwrap().refs += 1;
            }
        }
        for child in released {
            self.release(child);
        }
    }

    /// One durable name of `ino` is gone; an orphan that nothing names any more is deleted.
    fn release(&mut self, ino: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else { return };
        node.refs = node.refs.saturating_sub(1);
        if node.refs == 0 && matches!(node.loc, Loc::Orphan) {
            self.forget_node(ino);
        }
    }

    /// Delete a node for good (from orphans, or live when nothing durable names it).
    fn forget_node(&mut self, ino: u64) {
        let path = self.path(ino);
        let Some(node) = self.nodes.remove(&ino) else { return };
        if let Some(path) = path {
            let _ = if node.kind == Kind::Dir { fs::remove_dir(&path) } else { fs::remove_file(&path) };
        }
        for child in node.durable.values() {
            self.release(*child);
        }
    }

    /// Take `name` out of `parent`'s live entries: park the node if a durable map still names it.
    pub fn detach(&mut self, parent: u64, name: &OsStr) -> Result<(), i32> {
        let ino = self.child(parent, name).ok_or(libc::ENOENT)?;
        let node = self.nodes.get(&ino).unwrap();
        if node.kind == Kind::Dir && !node.children.is_empty() {
            return Err(libc::ENOTEMPTY);
        }
        if node.refs > 0 {
            let from = self.path(ino).unwrap();
            let to = self.backing.join("orphans").join(ino.to_string());
            fs::rename(&from, &to).map_err(err)?;
            self.nodes.get_mut(&ino).unwrap().loc = Loc::Orphan;
        } else {
            self.forget_node(ino);
        }
        let p = self.nodes.get_mut(&parent).unwrap();
        p.children.remove(name);
        p.dirty_since.get_or_insert(Instant::now());
        Ok(())
    }

    pub fn move_entry(&mut self, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr) -> Result<(), i32> {
        let ino = self.child(parent, name).ok_or(libc::ENOENT)?;
        if self.child(newparent, newname).is_some() {
            self.detach(newparent, newname)?;
        }
        let from = self.path(ino).unwrap();
        let to = self.path(newparent).ok_or(libc::ENOENT)?.join(newname);
        fs::rename(&from, &to).map_err(err)?;
        self.nodes.get_mut(&parent).unwrap().children.remove(name);
        self.touch(parent);
        self.nodes.get_mut(&newparent).unwrap().children.insert(newname.to_owned(), ino);
        self.touch(newparent);
        self.nodes.get_mut(&ino).unwrap().loc = Loc::Live { parent: newparent, name: newname.to_owned() };
        Ok(())
    }

    /// Kernel writeback: whatever has been dirty longer than the window reaches the disk.
    pub fn writeback_tick(&mut self) {
        let Some(window) = self.writeback else { return };
        let due: Vec<u64> = self.nodes.iter()
            .filter(|(_, n)| n.dirty_since.map_or(false, |t| t.elapsed() >= window))
            .map(|(i, _)| *i).collect();
        for ino in due {
            match self.nodes[&ino].kind {
                Kind::File => self.sync_file(ino),
                Kind::Dir => self.sync_dir(ino),
            }
        }
    }

    pub fn sync_all(&mut self) {
        let inos: Vec<u64> = self.nodes.keys().copied().collect();
        for ino in &inos {
            self.sync_file(*ino);
        }
        for ino in &inos {
            self.sync_dir(*ino);
        }
    }

    /// The durably reachable nodes, from the root through the durable maps.
    fn reachable(&self) -> HashSet<u64> {
        let mut seen = HashSet::from([ROOT]);
        let mut stack = vec![ROOT];
        while let Some(dir) = stack.pop() {
            for child in self.nodes[&dir].durable.values() {
                if self.nodes.contains_key(child) && seen.insert(*child) && self.nodes[child].kind == Kind::Dir {
                    stack.push(*child);
                }
            }
        }
        seen
    }

    /// Power loss: discard every un-synced byte and entry; the live tree becomes the durable one.
    pub fn drop_unsynced(&mut self) -> io::Result<DropReport> {
        let began = Instant::now();
        self.handles.clear();
        let reachable = self.reachable();
        let (mut bytes, mut files, mut entries) = (0u64, 0u64, 0u64);
        let mut names: Vec<Dropped> = Vec::new();
        let inos: Vec<u64> = self.nodes.keys().copied().collect();
        for ino in &inos {
            let node = &self.nodes[ino];
            let live = matches!(node.loc, Loc::Live { .. });
            if node.kind == Kind::Dir {
                if reachable.contains(ino) {
                    let dir = self.rel(*ino);
                    for (name, v) in &node.children {
                        if node.durable.get(name) != Some(v) {
                            entries += 1;
                            names.push(Dropped { path: join(&dir, name), what: "entry", bytes: 0 });
                        }
                    }
                    for (name, v) in &node.durable {
                        if node.children.get(name) != Some(v) {
                            entries += 1;
                            names.push(Dropped { path: join(&dir, name), what: "restored", bytes: 0 });
                        }
                    }
                }
                continue;
            }
            if !reachable.contains(ino) {
                if live {
                    files += 1; // a file whose name never reached the disk vanishes, synced data too
                    let gone = node.dirty_bytes() + node.durable_size.min(node.size);
                    bytes += gone;
                    names.push(Dropped { path: self.rel(*ino), what: "vanished", bytes: gone });
                }
                continue;
            }
            let lost = node.dirty_bytes();
            if lost > 0 || node.size != node.durable_size || !node.undo.is_empty() {
                files += (lost > 0) as u64; // a file only cut back to its synced size lost no data
                bytes += lost;
                if lost > 0 {
                    names.push(Dropped { path: self.rel(*ino), what: "bytes", bytes: lost });
                }
                let path = self.path(*ino).unwrap();
                let file = fs::OpenOptions::new().write(true).open(&path)?;
                file.set_len(node.durable_size)?;
                for (at, data) in &node.undo {
                    file.write_all_at(data, *at)?;
                }
            }
        }
        // Rebuild the tree from the durable maps: files are moved (copied when named twice).
        let new_root = self.backing.join("newlive");
        let _ = fs::remove_dir_all(&new_root);
        fs::create_dir(&new_root)?;
        let mut placed: HashMap<u64, PathBuf> = HashMap::new();
        let mut stack = vec![(ROOT, new_root.clone())];
        let mut moves = Vec::new();
        while let Some((dir, at)) = stack.pop() {
            for (name, child) in &self.nodes[&dir].durable {
                let Some(node) = self.nodes.get(child) else { continue };
                let dst = at.join(name);
                if node.kind == Kind::Dir {
                    fs::create_dir(&dst)?;
                    stack.push((*child, dst));
                } else {
                    moves.push((*child, dst));
                }
            }
        }
        for (ino, dst) in moves {
            if let Some(first) = placed.get(&ino) {
                fs::copy(first, &dst)?;
            } else {
                fs::rename(self.path(ino).unwrap(), &dst)?;
                placed.insert(ino, dst);
            }
        }
        fs::remove_dir_all(self.backing.join("live"))?;
        fs::remove_dir_all(self.backing.join("orphans"))?;
        fs::rename(&new_root, self.backing.join("live"))?;
        fs::create_dir(self.backing.join("orphans"))?;
        self.generation += 1;
        self.scan()?;
        let c = &mut self.counters;
        c.drops += 1;
        c.dropped_bytes += bytes;
        c.dropped_files += files;
        c.dropped_entries += entries;
        // Names first (a lost directory name takes its whole subtree), then vanished files, then cut
        // files, each by path: at 200 the names Kafka's internal topics leave must not push a data
        // directory's name off the list.
        names.sort_by(|a, b| (a.rank(), &a.path).cmp(&(b.rank(), &b.path)));
        let names_more = names.len().saturating_sub(MAX_NAMES) as u64;
        names.truncate(MAX_NAMES);
        Ok(DropReport { dropped_bytes: bytes, dropped_files: files, dropped_entries: entries,
                        seconds: began.elapsed().as_secs_f64(), names, names_more })
    }

    /// A node's live path under the mount ("/" for the root; "<orphan N>" for a parked node).
    fn rel(&self, ino: u64) -> String {
        let live = self.backing.join("live");
        match self.path(ino) {
            Some(p) if p.starts_with(&live) => {
                let r = p.strip_prefix(&live).unwrap().to_string_lossy().into_owned();
                format!("/{r}")
            }
            _ => format!("<orphan {ino}>"),
        }
    }

    pub fn stats_json(&self) -> String {
        let files: Vec<&Node> = self.nodes.values().filter(|n| n.kind == Kind::File).collect();
        let dirty: Vec<&&Node> = files.iter().filter(|n| n.dirty_bytes() > 0 || n.size != n.durable_size).collect();
        let dirty_dirs = self.nodes.values().filter(|n| n.entries_dirty()).count();
        let c = &self.counters;
        format!(
            "{{\"ok\": true, \"files\": {}, \"dirty_files\": {}, \"dirty_bytes\": {}, \"dirty_dirs\": {}, \
             \"fsyncs\": {}, \"fsyncdirs\": {}, \"written_bytes\": {}, \"drops\": {}, \"dropped_bytes_total\": {}, \
             \"dropped_files_total\": {}, \"dropped_entries_total\": {}, \"writeback_s\": {}, \"fault\": {}}}",
            files.len(), dirty.len(), dirty.iter().map(|n| n.dirty_bytes()).sum::<u64>(), dirty_dirs,
            c.fsyncs, c.fsyncdirs, c.written_bytes, c.drops, c.dropped_bytes, c.dropped_files, c.dropped_entries,
            self.writeback.map_or("null".to_string(), |w| format!("{}", w.as_secs_f64())),
            self.fault.as_ref().map_or("null".to_string(), |f| f.json()))
    }
}

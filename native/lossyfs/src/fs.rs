//! The FUSE side: every request is a passthrough to `backing/live`, recorded in the model first.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
            ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow};

use crate::fault;
use crate::state::{Kind, Loc, State, ROOT};

pub struct LossyFs {
    pub state: Arc<Mutex<State>>,
    pub ttl: Duration,
}

fn errno(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn to_time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH
    }
}

fn attr_of(ino: u64, m: &fs::Metadata) -> FileAttr {
    let kind = if m.is_dir() { FileType::Directory } else if m.file_type().is_symlink() { FileType::Symlink } else { FileType::RegularFile };
    FileAttr {
        ino, size: m.size(), blocks: m.blocks(), atime: to_time(m.atime(), m.atime_nsec()),
        mtime: to_time(m.mtime(), m.mtime_nsec()), ctime: to_time(m.ctime(), m.ctime_nsec()),
        crtime: to_time(m.ctime(), m.ctime_nsec()), kind, perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32, uid: m.uid(), gid: m.gid(), rdev: m.rdev() as u32, blksize: m.blksize() as u32, flags: 0,
    }
}

fn time_of(t: TimeOrNow) -> libc::timespec {
    match t {
        TimeOrNow::Now => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        TimeOrNow::SpecificTime(t) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec { tv_sec: d.as_secs() as i64, tv_nsec: d.subsec_nanos() as i64 }
        }
    }
}

impl LossyFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stat(st: &State, ino: u64) -> Result<FileAttr, i32> {
        let path = st.path(ino).ok_or(libc::ENOENT)?;
        let meta = fs::symlink_metadata(&path).map_err(errno)?;
        Ok(attr_of(ino, &meta))
    }

    fn open_handle(st: &mut State, ino: u64) -> Result<u64, i32> {
        let path = st.path(ino).ok_or(libc::ENOENT)?;
        // Always read-write and never O_APPEND: the kernel gives every write its offset, and
        // mmap writeback may come through any handle of the inode.
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(errno)?;
        let fh = st.next_fh;
        st.next_fh += 1;
        st.handles.insert(fh, (ino, file));
        Ok(fh)
    }

    fn chown(path: &std::path::Path, req: &Request<'_>) {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        unsafe { libc::lchown(c.as_ptr(), req.uid(), req.gid()) };
    }
}

impl Filesystem for LossyFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let st = self.lock();
        match st.child(parent, name).ok_or(libc::ENOENT).and_then(|ino| Self::stat(&st, ino)) {
            Ok(attr) => reply.entry(&self.ttl, &attr, st.generation),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        let st = self.lock();
        if let Some((_, file)) = fh.and_then(|fh| st.handles.get(&fh)) {
            match file.metadata() {
                Ok(m) => return reply.attr(&self.ttl, &attr_of(ino, &m)),
                Err(e) => return reply.error(errno(e)),
            }
        }
        match Self::stat(&st, ino) {
            Ok(attr) => reply.attr(&self.ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(&mut self, _req: &Request<'_>, ino: u64, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>,
               size: Option<u64>, atime: Option<TimeOrNow>, mtime: Option<TimeOrNow>, _ctime: Option<SystemTime>,
               _fh: Option<u64>, _crtime: Option<SystemTime>, _chgtime: Option<SystemTime>,
               _bkuptime: Option<SystemTime>, _flags: Option<u32>, reply: ReplyAttr) {
        let mut st = self.lock();
        let Some(path) = st.path(ino) else { return reply.error(libc::ENOENT) };
        let result = (|| -> Result<(), i32> {
            if let Some(size) = size {
                if let Some(e) = st.refuse(fault::TRUNCATE, ino, None) {
                    return Err(e);
                }
                st.save_range(ino, size, u64::MAX)?;
                OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(size)).map_err(errno)?;
                let node = st.nodes.get_mut(&ino).ok_or(libc::ENOENT)?;
                node.size = size;
                st.touch(ino);
            }
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(errno)?;
            }
            if uid.is_some() || gid.is_some() {
                let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
                let r = unsafe { libc::lchown(c.as_ptr(), uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX)) };
                if r != 0 {
                    return Err(errno(std::io::Error::last_os_error()));
                }
            }
            if atime.is_some() || mtime.is_some() {
                let omit = libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT };
                let times = [atime.map_or(omit, time_of), mtime.map_or(omit, time_of)];
                let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
                let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
                if r != 0 {
                    return Err(errno(std::io::Error::last_os_error()));
                }
            }
            Ok(())
        })();
        match result.and_then(|_| Self::stat(&st, ino)) {
            Ok(attr) => reply.attr(&self.ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut st = self.lock();
        if st.child(parent, name).is_some() {
            return reply.error(libc::EEXIST);
        }
        if let Some(e) = st.refuse(fault::MKDIR, parent, Some(name)) {
            return reply.error(e);
        }
        let Some(path) = st.path(parent).map(|p| p.join(name)) else { return reply.error(libc::ENOENT) };
        if let Err(e) = fs::create_dir(&path) {
            return reply.error(errno(e));
        }
        let _ = fs::set_permissions(&path, fs::Permissions::from_mode(mode & !umask));
        Self::chown(&path, req);
        let ino = st.add_child(parent, name, Kind::Dir, 0);
        match Self::stat(&st, ino) {
            Ok(attr) => reply.entry(&self.ttl, &attr, st.generation),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        if let Some(e) = st.refuse(fault::REMOVE, parent, Some(name)) {
            return reply.error(e);
        }
        match st.detach(parent, name) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.lock();
        match st.child(parent, name) {
            Some(ino) if st.nodes[&ino].kind != Kind::Dir => reply.error(libc::ENOTDIR),
            Some(_) => match st.refuse(fault::REMOVE, parent, Some(name)).map_or_else(|| st.detach(parent, name), Err) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
            None => reply.error(libc::ENOENT),
        }
    }

    fn rename(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32,
              reply: ReplyEmpty) {
        let mut st = self.lock();
        if flags & libc::RENAME_EXCHANGE != 0 {
            return reply.error(libc::EINVAL);
        }
        if flags & libc::RENAME_NOREPLACE != 0 && st.child(newparent, newname).is_some() {
            return reply.error(libc::EEXIST);
        }
        if let Some(e) = st.refuse(fault::RENAME, parent, Some(name)) {
            return reply.error(e);
        }
        match st.move_entry(parent, name, newparent, newname) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let mut st = self.lock();
        if flags & libc::O_TRUNC != 0 {
            if let Some(e) = st.refuse(fault::TRUNCATE, ino, None) {
                return reply.error(e);
            }
            if let Err(e) = st.save_range(ino, 0, u64::MAX) {
                return reply.error(e);
            }
            if let Some(path) = st.path(ino) {
                let _ = OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(0));
            }
            st.nodes.get_mut(&ino).map(|n| n.size = 0);
            st.touch(ino);
        }
        match Self::open_handle(&mut st, ino) {
            Ok(fh) => reply.opened(fh, 0),
            Err(e) => reply.error(e),
        }
    }

    fn create(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, mode: u32, umask: u32, _flags: i32,
              reply: ReplyCreate) {
        let mut st = self.lock();
        if st.child(parent, name).is_some() {
            return reply.error(libc::EEXIST);
        }
        if let Some(e) = st.refuse(fault::CREATE, parent, Some(name)) {
            return reply.error(e);
        }
        let Some(path) = st.path(parent).map(|p| p.join(name)) else { return reply.error(libc::ENOENT) };
        if let Err(e) = OpenOptions::new().write(true).create_new(true).mode(mode & !umask).open(&path) {
            return reply.error(errno(e));
        }
        Self::chown(&path, req);
        let ino = st.add_child(parent, name, Kind::File, 0);
        let result = Self::open_handle(&mut st, ino).and_then(|fh| Ok((fh, Self::stat(&st, ino)?)));
        match result {
            Ok((fh, attr)) => reply.created(&self.ttl, &attr, st.generation, fh, 0),
            Err(e) => reply.error(e),
        }
    }

    fn read(&mut self, _req: &Request<'_>, ino: u64, fh: u64, offset: i64, size: u32, _flags: i32,
            _lock: Option<u64>, reply: ReplyData) {
        let mut st = self.lock();
        if let Some(e) = st.refuse(fault::READ, ino, None) {
            return reply.error(e);
        }
        let Some((_, file)) = st.handles.get(&fh) else { return reply.error(libc::EBADF) };
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match file.read_at(&mut buf[got..], offset as u64 + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.data(&buf[..got]);
    }

    fn write(&mut self, _req: &Request<'_>, ino: u64, fh: u64, offset: i64, data: &[u8], _wflags: u32, _flags: i32,
             _lock: Option<u64>, reply: ReplyWrite) {
        let mut st = self.lock();
        if !st.handles.contains_key(&fh) {
            return reply.error(libc::EBADF);
        }
        if let Some(e) = st.refuse(fault::WRITE, ino, None) {
            return reply.error(e);
        }
        let (start, end) = (offset as u64, offset as u64 + data.len() as u64);
        if let Err(e) = st.save_range(ino, start, end) {
            return reply.error(e);
        }
        if let Err(e) = st.handles[&fh].1.write_all_at(data, start) {
            return reply.error(errno(e));
        }
        if let Some(node) = st.nodes.get_mut(&ino) {
            node.size = node.size.max(end);
            node.note_write(start, end);
        }
        st.touch(ino);
        st.counters.written_bytes += data.len() as u64;
        reply.written(data.len() as u32);
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, _flags: i32, _lock: Option<u64>, _flush: bool,
               reply: ReplyEmpty) {
        self.lock().handles.remove(&fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        let mut st = self.lock();
        if let Some(e) = st.refuse(fault::FSYNC, ino, None) {
            return reply.error(e); // and nothing becomes durable: the model keeps the file dirty
        }
        // The backing file is synced too, so that an fsync costs what it costs on this disk
        // (the `fsync` profile's price must show through the layer).
        if let Some((_, file)) = st.handles.get(&fh) {
            let synced = if datasync { file.sync_data() } else { file.sync_all() };
            if let Err(e) = synced {
                return reply.error(errno(e));
            }
        }
        st.sync_file(ino);
        st.counters.fsyncs += 1;
        reply.ok();
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        let st = self.lock();
        match st.nodes.get(&ino) {
            Some(n) if n.kind == Kind::Dir => reply.opened(0, 0),
            Some(_) => reply.error(libc::ENOTDIR),
            None => reply.error(libc::ENOENT),
        }
    }

    fn readdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, offset: i64, mut reply: ReplyDirectory) {
        let st = self.lock();
        let Some(node) = st.nodes.get(&ino) else { return reply.error(libc::ENOENT) };
        let parent = match &node.loc { Loc::Live { parent, .. } if ino != ROOT => *parent, _ => ino };
        let mut entries = vec![(ino, FileType::Directory, OsStr::new(".").to_owned()),
                               (parent, FileType::Directory, OsStr::new("..").to_owned())];
        for (name, child) in &node.children {
            let kind = if st.nodes[child].kind == Kind::Dir { FileType::Directory } else { FileType::RegularFile };
            entries.push((*child, kind, name.clone()));
        }
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(child, (i + 1) as i64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.lock();
        if let Some(e) = st.refuse(fault::FSYNC, ino, None) {
            return reply.error(e);
        }
        if let Some(dir) = st.path(ino).and_then(|p| fs::File::open(p).ok()) {
            let _ = dir.sync_all();
        }
        st.sync_dir(ino);
        st.counters.fsyncdirs += 1;
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let st = self.lock();
        let c = std::ffi::CString::new(st.backing.as_os_str().as_bytes()).unwrap();
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(libc::EIO);
        }
        // A full disk says so to statfs too (df, Kafka's DescribeLogDirs usable bytes).
        let full = st.fault.as_ref().map_or(false, |f| f.errno == libc::ENOSPC);
        let (bfree, bavail) = if full { (0, 0) } else { (s.f_bfree, s.f_bavail) };
        reply.statfs(s.f_blocks, bfree, bavail, s.f_files, s.f_ffree, s.f_bsize as u32,
                     s.f_namemax as u32, s.f_frsize as u32);
    }

    fn fallocate(&mut self, _req: &Request<'_>, ino: u64, fh: u64, offset: i64, length: i64, mode: i32,
                 reply: ReplyEmpty) {
        let mut st = self.lock();
        if mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) != 0 {
            return reply.error(libc::EOPNOTSUPP); // they shift data; nothing here needs them
        }
        if let Some(e) = st.refuse(fault::FALLOCATE, ino, None) {
            return reply.error(e);
        }
        let (start, end) = (offset as u64, (offset + length) as u64);
        if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
            if let Err(e) = st.save_range(ino, start, end) {
                return reply.error(e);
            }
        }
        let Some((_, file)) = st.handles.get(&fh) else { return reply.error(libc::EBADF) };
        if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) } != 0 {
            return reply.error(errno(std::io::Error::last_os_error()));
        }
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if let Some(node) = st.nodes.get_mut(&ino) {
            node.size = size;
        }
        st.touch(ino);
        reply.ok();
    }
}


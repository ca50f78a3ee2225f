//! A fault's answer to one filesystem operation: the one place where the state (state.rs) meets an
//! injected fault (fault.rs). Kept apart from both so that neither module needs the other's insides:
//! state.rs holds an `Option<Fault>`, fault.rs knows nothing of the state.

impl crate::state::State {
    /// The errno to answer `op` on node `ino` (or on `name` in directory `ino`) with, if a fault
    /// refuses it; counted. None, at the cost of one branch, while the disk is healthy.
    #[inline]
    pub fn refuse(&mut self, op: u32, ino: u64, name: Option<&std::ffi::OsStr>) -> Option<i32> {
        let fault = self.fault.as_ref()?;
        if fault.ops & op == 0 {
            return None;
        }
        let rel = if fault.path.is_empty() {
            None
        } else {
            let live = self.backing.join("live");
            self.path(ino).map(|p| match name { Some(n) => p.join(n), None => p })
                .and_then(|p| p.strip_prefix(&live).ok().map(|r| r.to_path_buf()))
        };
        let fault = self.fault.as_mut()?;
        if !fault.applies(op, rel.as_deref()) {
            return None;
        }
        fault.count(op);
        Some(fault.errno)
    }
}

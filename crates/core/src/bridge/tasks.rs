//! The execution-context (task) id cached per request scope (`runtime-protocol.md` §8.2 step
//! 5.1: "the one cached for the scope"), bounded.
//!
//! A scope is `<runtime>:<runtime_session_id | global>`, and the runtime chooses the session
//! id: one that sends a fresh id with every call would otherwise grow the cache by an entry
//! per call for as long as the daemon runs. The cache keeps the [`MAX_TASK_SCOPES`] scopes used
//! most recently; a scope evicted and used again simply starts a new task.

use std::collections::{BTreeMap, HashMap};

/// How many scopes keep their task id.
pub const MAX_TASK_SCOPES: usize = 1024;

/// scope → task id, evicting the least recently used scope beyond the capacity.
#[derive(Debug)]
pub(super) struct TaskCache {
    capacity: usize,
    /// scope → (task id, the stamp of its last use).
    tasks: HashMap<String, (String, u64)>,
    /// stamp of last use → scope: the oldest first.
    by_use: BTreeMap<u64, String>,
    /// Counts uses; stamps only order them (no clock is read).
    next: u64,
}

impl Default for TaskCache {
    fn default() -> Self {
        TaskCache::with_capacity(MAX_TASK_SCOPES)
    }
}

impl TaskCache {
    /// A cache keeping at most `capacity` scopes (at least one).
    pub(super) fn with_capacity(capacity: usize) -> TaskCache {
        TaskCache {
            capacity: capacity.max(1),
            tasks: HashMap::new(),
            by_use: BTreeMap::new(),
            next: 0,
        }
    }

    /// The task id of `scope`, made with `make` on first use (or after eviction).
    pub(super) fn get_or_make(&mut self, scope: &str, make: impl FnOnce() -> String) -> String {
        self.next += 1;
        let stamp = self.next;
        if let Some((task, used)) = self.tasks.get_mut(scope) {
            self.by_use.remove(used);
            *used = stamp;
            self.by_use.insert(stamp, scope.to_owned());
            return task.clone();
        }
        while self.tasks.len() >= self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.tasks.remove(&oldest);
        }
        let task = make();
        self.tasks.insert(scope.to_owned(), (task.clone(), stamp));
        self.by_use.insert(stamp, scope.to_owned());
        task
    }

    /// How many scopes hold a task id.
    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_scope_goes_first() {
        let mut cache = TaskCache::with_capacity(2);
        let mut n = 0;
        let mut make = || {
            n += 1;
            format!("task-{n}")
        };
        assert_eq!(cache.get_or_make("a", &mut make), "task-1");
        assert_eq!(cache.get_or_make("b", &mut make), "task-2");
        // `a` is used again, so `b` is the oldest when `c` arrives.
        assert_eq!(cache.get_or_make("a", &mut make), "task-1");
        assert_eq!(cache.get_or_make("c", &mut make), "task-3");
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get_or_make("a", &mut make), "task-1");
        assert_eq!(cache.get_or_make("b", &mut make), "task-4");
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.tasks.len(), cache.by_use.len());
    }
}

//! Caches with an owner: [`Caches`], a handle the user creates, sizes and passes.
//!
//! Compiling and masking repeat work across requests: the lexeme automata of recurring scalar
//! schemas (formats, bounded strings and numbers), their JSON-escaped forms, and the walks of
//! those automata over a vocabulary's token trie. Nothing in the library keeps such work in a
//! process-wide `static`; it goes into a [`Caches`] value, which
//! - has a size limit in bytes and evicts the least recently used entries past it (one entry at
//!   a time, never the whole cache at once, so a full cache costs no latency spike);
//! - is shared across threads (a clone is another handle to the same cache);
//! - is chosen by the user: one for the whole server, one per model (so two models get separate
//!   budgets), or none (each compile then shares lexemes only within itself).
//!
//! Where a cache comes from:
//! - [`crate::CompileOptions::caches`] (also in a dialect's [`crate::DialectOptions::compile`]):
//!   the compiled lexemes. Unset, a compile keeps its lexemes to itself.
//! - [`crate::TokenAutomaton::new`]: the token walks go into the grammar's compile caches if it
//!   had one, otherwise into the vocabulary's own ([`crate::Vocab::caches`], created with the
//!   vocabulary at [`DEFAULT_CACHE_BYTES`]); [`crate::TokenAutomaton::with_caches`] names one.
//!
//! Trade-offs: one lock guards a cache, taken for each lookup (a hit also moves the entry to the
//! front); entries are built outside the lock, so two threads missing the same key may both
//! build it (the results are identical; the last one stays). Sizes are estimates of the heap
//! bytes an entry holds. Entries keyed by an automaton's address hold that automaton, so the
//! address cannot be reused while the entry lives.

use lru::LruCache;
use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of a cache made by `Caches::default()`, and of each vocabulary's own.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// What an entry is for: the key spaces of the caches' users.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CacheKey {
    /// A lexeme automaton, by the schema keywords that define it.
    Lexeme(String),
    /// A lexeme automaton escaped for a JSON string, by the source automaton's address.
    Escaped(usize),
    /// A lexeme automaton's walk over a whole vocabulary, from one state.
    LexemeWalk { vocab: u64, dfa: usize, state: u32 },
    /// A lexeme automaton's walk below one first-byte node of a vocabulary's trie.
    SubWalk {
        vocab: u64,
        dfa: usize,
        state: u32,
        node: u32,
    },
}

/// One entry: the value and its estimated bytes.
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    bytes: usize,
}

/// The entries and their counters.
struct Store {
    entries: LruCache<CacheKey, Entry>,
    bytes: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

struct Inner {
    max_bytes: usize,
    store: Mutex<Store>,
}

/// A bounded, least-recently-used cache of compiled lexemes and token walks, shared across
/// threads: the user creates and sizes it, and passes it to compiles
/// ([`crate::CompileOptions::caches`]) or automata ([`crate::TokenAutomaton::with_caches`]); each
/// vocabulary also has its own ([`crate::Vocab::caches`]). Entries are estimated in bytes and
/// evicted one at a time, least recently used first.
///
/// ```
/// use callmask::{Caches, CompileOptions, Grammar};
/// let caches = Caches::new(64 << 20); // 64 MiB
/// let options = CompileOptions::default().caches(Some(caches.clone()));
/// let schema = serde_json::json!({"type": "string", "format": "email"});
/// Grammar::from_json_schema(&schema, &options)?;
/// assert!(caches.bytes() > 0);
/// let again = caches.stats().hits;
/// Grammar::from_json_schema(&schema, &options)?; // the email automaton comes from the cache
/// assert!(caches.stats().hits > again);
/// # Ok::<(), callmask::Error>(())
/// ```
#[derive(Clone)]
pub struct Caches {
    inner: Arc<Inner>,
}

/// A snapshot of a [`Caches`]' use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CacheStats {
    /// Entries held.
    pub entries: usize,
    /// Estimated bytes held.
    pub bytes: usize,
    /// The size limit in bytes.
    pub max_bytes: usize,
    /// Lookups that found their entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Caches").field(&self.stats()).finish()
    }
}

impl Default for Caches {
    /// A cache of [`DEFAULT_CACHE_BYTES`].
    fn default() -> Self {
        Caches::new(DEFAULT_CACHE_BYTES)
    }
}

impl Caches {
    /// An empty cache holding at most `max_bytes` (estimated); 0 caches nothing.
    pub fn new(max_bytes: usize) -> Caches {
        Caches {
            inner: Arc::new(Inner {
                max_bytes,
                store: Mutex::new(Store {
                    entries: LruCache::unbounded(),
                    bytes: 0,
                    hits: 0,
                    misses: 0,
                    evictions: 0,
                }),
            }),
        }
    }

    /// The size limit in bytes.
    pub fn max_bytes(&self) -> usize {
        self.inner.max_bytes
    }

    /// Estimated bytes held now.
    pub fn bytes(&self) -> usize {
        self.store().bytes
    }

    /// Entries, bytes and counters.
    pub fn stats(&self) -> CacheStats {
        let s = self.store();
        CacheStats {
            entries: s.entries.len(),
            bytes: s.bytes,
            max_bytes: self.inner.max_bytes,
            hits: s.hits,
            misses: s.misses,
            evictions: s.evictions,
        }
    }

    /// Drops every entry (the counters stay). Values in use elsewhere stay alive there.
    pub fn clear(&self) {
        let mut s = self.store();
        s.entries.clear();
        s.bytes = 0;
    }

    /// Whether `self` and `other` are handles to the same cache.
    pub fn same_as(&self, other: &Caches) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while the lock was held cannot leave an entry half-made (entries are built
        // outside it), so a poisoned lock is still consistent.
        self.inner.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry under `key`, if it holds a `V` (made the most recently used).
    pub(crate) fn get<V: Any + Send + Sync>(&self, key: &CacheKey) -> Option<Arc<V>> {
        let mut s = self.store();
        let found = s
            .entries
            .get(key)
            .and_then(|e| e.value.clone().downcast::<V>().ok());
        if found.is_some() {
            s.hits += 1;
        } else {
            s.misses += 1;
        }
        found
    }

    /// Keeps `value` under `key`, evicting the least recently used entries until it fits. A
    /// value larger than the whole cache is not kept.
    pub(crate) fn insert<V: Any + Send + Sync>(&self, key: CacheKey, value: Arc<V>, bytes: usize) {
        let bytes = bytes + std::mem::size_of::<(CacheKey, Entry)>();
        let mut s = self.store();
        if let Some(old) = s.entries.pop(&key) {
            s.bytes -= old.bytes;
        }
        if bytes > self.inner.max_bytes {
            return;
        }
        while s.bytes + bytes > self.inner.max_bytes {
            let Some((_, old)) = s.entries.pop_lru() else {
                break;
            };
            s.bytes -= old.bytes;
            s.evictions += 1;
        }
        s.entries.put(key, Entry { value, bytes });
        s.bytes += bytes;
    }

    /// The entry under `key`, or `build`'s value (and its estimated bytes), then kept. `build`
    /// runs outside the lock.
    pub(crate) fn get_or_build<V: Any + Send + Sync, E>(
        &self,
        key: CacheKey,
        build: impl FnOnce() -> Result<(V, usize), E>,
    ) -> Result<Arc<V>, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let (value, bytes) = build()?;
        let value = Arc::new(value);
        self.insert(key, value.clone(), bytes);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `static` items the core may hold: none is a cache (a fixed table, an id counter).
    const ALLOWED_STATICS: [&str; 2] = ["static TABLE:", "static NEXT_VOCAB_ID:"];

    /// No process-wide cache in the core: every `static` item in its sources is one of
    /// [`ALLOWED_STATICS`]; a cache goes into [`Caches`] under a [`CacheKey`] of its own.
    #[test]
    fn no_static_cache_in_the_core() {
        fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    sources(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let mut files = Vec::new();
        sources(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        assert!(files.len() > 40, "found only {} sources", files.len());
        let mut found = Vec::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for line in text.lines() {
                let code = line.trim_start();
                let code = code
                    .strip_prefix("pub(crate) ")
                    .or_else(|| code.strip_prefix("pub "))
                    .unwrap_or(code);
                if code.starts_with("static ") && !code.contains("ALLOWED_STATICS") {
                    found.push(format!("{}: {code}", f.display()));
                }
            }
        }
        let stray: Vec<&String> = found
            .iter()
            .filter(|l| !ALLOWED_STATICS.iter().any(|a| l.contains(a)))
            .collect();
        assert!(stray.is_empty(), "static items in the core: {stray:#?}");
        assert_eq!(found.len(), ALLOWED_STATICS.len(), "{found:#?}");
    }

    fn key(i: usize) -> CacheKey {
        CacheKey::Escaped(i)
    }

    #[test]
    fn evicts_the_least_recently_used_past_its_size() {
        let entry = std::mem::size_of::<(CacheKey, Entry)>();
        let c = Caches::new(3 * (100 + entry));
        for i in 0..3 {
            c.insert(key(i), Arc::new(i), 100);
        }
        assert_eq!(c.stats().entries, 3);
        // Entry 0 becomes the most recently used, so 1 goes first.
        assert_eq!(c.get::<usize>(&key(0)).as_deref(), Some(&0));
        c.insert(key(3), Arc::new(3), 100);
        assert!(c.get::<usize>(&key(1)).is_none());
        assert!(c.get::<usize>(&key(0)).is_some());
        assert!(c.get::<usize>(&key(2)).is_some());
        assert_eq!(c.stats().evictions, 1);
        assert!(c.bytes() <= c.max_bytes());
        // Too big for the whole cache: not kept, nothing evicted for it.
        c.insert(key(9), Arc::new(9usize), c.max_bytes());
        assert!(c.get::<usize>(&key(9)).is_none());
        assert_eq!(c.stats().entries, 3);
    }

    #[test]
    fn a_value_of_another_type_is_a_miss() {
        let c = Caches::default();
        c.insert(key(1), Arc::new(1u32), 4);
        assert!(c.get::<u64>(&key(1)).is_none());
        assert_eq!(c.get::<u32>(&key(1)).as_deref(), Some(&1));
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
    }

    #[test]
    fn clones_share_and_clear_empties() {
        let c = Caches::new(1 << 20);
        let d = c.clone();
        assert!(c.same_as(&d) && !c.same_as(&Caches::new(1)));
        let built = d.get_or_build(key(5), || Ok::<_, ()>((5usize, 8))).unwrap();
        assert_eq!(*built, 5);
        let again = c
            .get_or_build(key(5), || -> Result<(usize, usize), ()> {
                panic!("rebuilt")
            })
            .unwrap();
        assert!(Arc::ptr_eq(&built, &again));
        c.clear();
        assert_eq!((d.stats().entries, d.bytes()), (0, 0));
        assert!(Caches::new(0)
            .get_or_build(key(1), || Ok::<_, ()>((1u8, 1)))
            .is_ok());
    }
}

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
//!   The walks of whitespace gaps always go into the vocabulary's own: a gap's automaton is a
//!   function of the whitespace policy alone, so every grammar with that policy shares them,
//!   and a server's first request makes them for all that follow.
//!
//! Keys are typed: each kind of cached thing has a key type implementing [`CacheKey`], whose
//! `Value` is the one type kept under such keys. An entry is found only by a key of the same
//! type and equal value, so a lookup cannot meet a value of another type, and two kinds cannot
//! collide however their keys print.
//!
//! Trade-offs: one lock guards a cache, taken for each lookup (a hit also moves the entry to the
//! front); entries are built outside the lock, so two threads missing the same key may both
//! build it (the results are identical; the last one stays). Sizes are estimates of the heap
//! bytes an entry holds. Entries keyed by an automaton's address hold that automaton, so the
//! address cannot be reused while the entry lives.

use lru::LruCache;
use std::any::{Any, TypeId};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of a cache made by `Caches::default()`, and of each vocabulary's own.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// The key of one kind of cached thing: its type names the type of the values kept under it.
pub(crate) trait CacheKey: Hash + Eq + Send + Sync + 'static {
    /// What an entry under such a key holds.
    type Value: Send + Sync + 'static;
}

/// A key as the store holds it: its type, its hash, and the key itself for equality.
struct StoredKey {
    kind: TypeId,
    hash: u64,
    key: Box<dyn Any + Send + Sync>,
    /// Equality with a key of any type (see [`same_key`]).
    eq: fn(&dyn Any, &dyn Any) -> bool,
}

/// True when `a` and `b` are both `K`s and equal.
fn same_key<K: CacheKey>(a: &dyn Any, b: &dyn Any) -> bool {
    matches!((a.downcast_ref::<K>(), b.downcast_ref::<K>()), (Some(x), Some(y)) if x == y)
}

/// The hash of a key of type `K` (its type and its value).
fn key_hash<K: CacheKey>(key: &K) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    TypeId::of::<K>().hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

/// A key as lookups see it, stored ([`StoredKey`]) or borrowed ([`Probe`]): the store finds an
/// entry without boxing the key looked up.
trait LookupKey {
    fn kind(&self) -> TypeId;
    fn hash64(&self) -> u64;
    fn key(&self) -> &dyn Any;
    fn same(&self, other: &dyn Any) -> bool;
}

impl LookupKey for StoredKey {
    fn kind(&self) -> TypeId {
        self.kind
    }
    fn hash64(&self) -> u64 {
        self.hash
    }
    fn key(&self) -> &dyn Any {
        &*self.key
    }
    fn same(&self, other: &dyn Any) -> bool {
        (self.eq)(&*self.key, other)
    }
}

/// A borrowed key of type `K`, with its hash.
struct Probe<'k, K> {
    key: &'k K,
    hash: u64,
}

impl<K: CacheKey> LookupKey for Probe<'_, K> {
    fn kind(&self) -> TypeId {
        TypeId::of::<K>()
    }
    fn hash64(&self) -> u64 {
        self.hash
    }
    fn key(&self) -> &dyn Any {
        self.key
    }
    fn same(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<K>() == Some(self.key)
    }
}

impl Hash for dyn LookupKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

impl PartialEq for dyn LookupKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.hash64() == other.hash64() && self.same(other.key())
    }
}

impl Eq for dyn LookupKey + '_ {}

impl StoredKey {
    fn new<K: CacheKey>(key: K) -> StoredKey {
        StoredKey {
            kind: TypeId::of::<K>(),
            hash: key_hash(&key),
            key: Box::new(key),
            eq: same_key::<K>,
        }
    }
}

// The store hashes and compares its keys as `dyn LookupKey`, so that a `Probe` finds them.
impl Hash for StoredKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn LookupKey).hash(state);
    }
}

impl PartialEq for StoredKey {
    fn eq(&self, other: &StoredKey) -> bool {
        (self as &dyn LookupKey) == (other as &dyn LookupKey)
    }
}

impl Eq for StoredKey {}

impl<'a> std::borrow::Borrow<dyn LookupKey + 'a> for StoredKey {
    fn borrow(&self) -> &(dyn LookupKey + 'a) {
        self
    }
}

/// One entry: the value and its estimated bytes.
struct Entry {
    value: Arc<dyn Any + Send + Sync>,
    bytes: usize,
}

/// The entries and their counters.
struct Store {
    entries: LruCache<StoredKey, Entry>,
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

    /// The entry under `key` (made the most recently used).
    pub(crate) fn get<K: CacheKey>(&self, key: &K) -> Option<Arc<K::Value>> {
        let probe = Probe {
            key,
            hash: key_hash(key),
        };
        let mut s = self.store();
        // Entries under a `K` key hold a `K::Value` (see `insert`): the downcast cannot fail.
        let found = s
            .entries
            .get(&probe as &dyn LookupKey)
            .and_then(|e| e.value.clone().downcast::<K::Value>().ok());
        if found.is_some() {
            s.hits += 1;
        } else {
            s.misses += 1;
        }
        found
    }

    /// Keeps `value` under `key`, evicting the least recently used entries until it fits. A
    /// value larger than the whole cache is not kept.
    pub(crate) fn insert<K: CacheKey>(&self, key: K, value: Arc<K::Value>, bytes: usize) {
        let key = StoredKey::new(key);
        let bytes = bytes + std::mem::size_of::<(StoredKey, Entry)>();
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
    pub(crate) fn get_or_build<K: CacheKey, E>(
        &self,
        key: K,
        build: impl FnOnce() -> Result<(K::Value, usize), E>,
    ) -> Result<Arc<K::Value>, E> {
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

    /// A key kind for the tests: values are `usize`s.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    struct Num(usize);
    impl CacheKey for Num {
        type Value = usize;
    }

    /// Another kind, with keys that hash and print like [`Num`]'s.
    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    struct Other(usize);
    impl CacheKey for Other {
        type Value = String;
    }

    fn key(i: usize) -> Num {
        Num(i)
    }

    #[test]
    fn evicts_the_least_recently_used_past_its_size() {
        let entry = std::mem::size_of::<(StoredKey, Entry)>();
        let c = Caches::new(3 * (100 + entry));
        for i in 0..3 {
            c.insert(key(i), Arc::new(i), 100);
        }
        assert_eq!(c.stats().entries, 3);
        // Entry 0 becomes the most recently used, so 1 goes first.
        assert_eq!(c.get(&key(0)).as_deref(), Some(&0));
        c.insert(key(3), Arc::new(3), 100);
        assert!(c.get(&key(1)).is_none());
        assert!(c.get(&key(0)).is_some());
        assert!(c.get(&key(2)).is_some());
        assert_eq!(c.stats().evictions, 1);
        assert!(c.bytes() <= c.max_bytes());
        // Too big for the whole cache: not kept, nothing evicted for it.
        c.insert(key(9), Arc::new(9usize), c.max_bytes());
        assert!(c.get(&key(9)).is_none());
        assert_eq!(c.stats().entries, 3);
    }

    #[test]
    fn kinds_with_equal_payloads_are_different_keys() {
        let c = Caches::default();
        c.insert(Num(1), Arc::new(1), 4);
        assert!(c.get(&Other(1)).is_none());
        c.insert(Other(1), Arc::new("one".to_string()), 4);
        assert_eq!(c.get(&Num(1)).as_deref(), Some(&1));
        assert_eq!(c.get(&Other(1)).as_deref().map(String::as_str), Some("one"));
        let s = c.stats();
        assert_eq!((s.entries, s.hits, s.misses), (2, 2, 1));
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
            .get_or_build(key(1), || Ok::<_, ()>((1usize, 1)))
            .is_ok());
    }
}

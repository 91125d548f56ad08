//! Schemas the caller supplies for remote `$ref`s: a map of absolute URI → schema, and folders
//! whose files stand for the URIs under a base URI. Nothing is ever fetched over the network: a
//! `$ref` to a URI the registry does not hold stays an [`Error::UnresolvedRef`] naming it.

use crate::error::{Error, Result};
use fluent_uri::Uri;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest schema file read from a registry folder (bytes).
pub const MAX_REGISTRY_FILE_BYTES: u64 = 16 << 20;

/// Schemas for remote `$ref`s, by absolute URI (see [`crate::CompileOptions::registry`]).
///
/// ```
/// use callmask::{CompileOptions, Grammar, SchemaRegistry};
/// # fn main() -> Result<(), callmask::Error> {
/// let registry = SchemaRegistry::new()
///     .with_schema("https://example.com/point.json", serde_json::json!({
///         "type": "object",
///         "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
///         "required": ["x", "y"], "additionalProperties": false
///     }))?;
/// let options = CompileOptions::default().registry(registry);
/// let g = Grammar::from_json_schema_str(
///     r#"{"type": "array", "items": {"$ref": "https://example.com/point.json"}}"#,
///     &options,
/// )?;
/// assert!(g.check_bytes(br#"[{"x":1,"y":2}]"#).is_ok());
/// assert!(g.check_bytes(br#"[{"x":1}]"#).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct SchemaRegistry {
    /// Normalized absolute URI (no fragment) → schema.
    schemas: HashMap<String, Arc<Value>>,
    /// (normalized base URI ending in `/`, folder).
    folders: Vec<(String, PathBuf)>,
}

/// `uri` parsed as an absolute URI and normalized (RFC 3986 syntax-based normalization), with
/// an empty fragment dropped.
pub(crate) fn normalize_uri(uri: &str) -> Option<String> {
    let u = Uri::parse(uri).ok()?.normalize();
    Some(match u.fragment() {
        Some(f) if f.as_str().is_empty() => u.strip_fragment().as_str().to_string(),
        _ => u.as_str().to_string(),
    })
}

fn bad_uri(uri: &str, why: &str) -> Error {
    Error::InvalidOptions(format!("schema registry: {uri:?} {why}"))
}

impl SchemaRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `schema` as the document at `uri` (an absolute URI without a fragment). Its own
    /// `$id`, if any, is a second name for it.
    pub fn with_schema(mut self, uri: &str, schema: Value) -> Result<Self> {
        let u = normalize_uri(uri).ok_or_else(|| bad_uri(uri, "is not an absolute URI"))?;
        if u.contains('#') {
            return Err(bad_uri(uri, "has a fragment"));
        }
        self.schemas.insert(u, Arc::new(schema));
        Ok(self)
    }

    /// Maps the URIs under `base_uri` (an absolute URI ending in `/`) to the files under `dir`:
    /// `base_uri` + `a/b.json` is the file `dir/a/b.json`. Files are read only when a `$ref`
    /// names them, at most [`MAX_REGISTRY_FILE_BYTES`] each.
    pub fn with_folder(mut self, base_uri: &str, dir: impl Into<PathBuf>) -> Result<Self> {
        let u =
            normalize_uri(base_uri).ok_or_else(|| bad_uri(base_uri, "is not an absolute URI"))?;
        if u.contains('#') || u.contains('?') || !u.ends_with('/') {
            return Err(bad_uri(
                base_uri,
                "must end with `/` and have no query or fragment",
            ));
        }
        self.folders.push((u, dir.into()));
        Ok(self)
    }

    /// True when the registry holds no schema and no folder.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty() && self.folders.is_empty()
    }

    /// The schema at `uri` (normalized, no fragment), read from a folder if need be; `None`
    /// when the registry does not hold it.
    pub(crate) fn lookup(&self, uri: &str) -> Result<Option<Arc<Value>>> {
        if let Some(s) = self.schemas.get(uri) {
            return Ok(Some(s.clone()));
        }
        for (base, dir) in &self.folders {
            let Some(rest) = uri.strip_prefix(base.as_str()) else {
                continue;
            };
            let Some(file) = file_under(dir, rest) else {
                continue;
            };
            let meta = match std::fs::metadata(&file) {
                Ok(m) if m.is_file() => m,
                _ => continue,
            };
            if meta.len() > MAX_REGISTRY_FILE_BYTES {
                return Err(Error::LimitExceeded {
                    what: "schema registry file size (bytes)",
                    limit: MAX_REGISTRY_FILE_BYTES as usize,
                    option: "",
                    path: String::new(),
                });
            }
            let text = std::fs::read(&file).map_err(|source| Error::Io {
                path: file.clone(),
                source,
            })?;
            let v: Value = serde_json::from_slice(&text)?;
            return Ok(Some(Arc::new(v)));
        }
        Ok(None)
    }
}

/// The file for the relative URI path `rest` under `dir`: plain segments only (no `..`, `.`,
/// empty segment, query, fragment, backslash or percent escape), so a `$ref` cannot leave
/// the folder.
fn file_under(dir: &Path, rest: &str) -> Option<PathBuf> {
    if rest.is_empty() {
        return None;
    }
    let mut p = dir.to_path_buf();
    for seg in rest.split('/') {
        let ok = !seg.is_empty()
            && seg != "."
            && seg != ".."
            && !seg
                .chars()
                .any(|c| matches!(c, '\\' | '%' | '?' | '#' | ':' | '\0'));
        if !ok {
            return None;
        }
        p.push(seg);
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_paths_stay_inside() {
        let d = Path::new("/r");
        assert_eq!(
            file_under(d, "a/b.json"),
            Some(PathBuf::from("/r/a/b.json"))
        );
        for bad in ["", "../x", "a/../../x", "a//b", "a/%2e%2e/b", "a\\b", "./a"] {
            assert_eq!(file_under(d, bad), None, "{bad}");
        }
    }

    #[test]
    fn uris_are_normalized() {
        assert_eq!(
            normalize_uri("HTTP://Example.com:80/a/./b#").as_deref(),
            Some("http://example.com/a/b")
        );
        assert!(normalize_uri("relative/path").is_none());
        assert!(SchemaRegistry::new()
            .with_folder("http://x/a", "/tmp")
            .is_err());
    }
}

//! Byte-level matching over a compiled grammar.

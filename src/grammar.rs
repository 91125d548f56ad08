//! The compiled grammar: what a JSON Schema becomes, shared across threads and sequences.

//! JSON Schema → grammar IR.

//! Token masks: the token-level automaton shared across sequences, and per-sequence matchers.

//! Helpers for the multi-process tests: run svmrun under a hard deadline in its own process group.

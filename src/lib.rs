//! The end-to-end suite of mrtr-gate lives in `tests/` and `examples/`.

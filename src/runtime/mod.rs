//! Runtime adapters (spec 04 §2): one implementation per runtime.

//! Loopback HTTP: request checks and routing (spec 02 §3). [to be written]

//! AFL++ target `files`: see [`iapeer_fuzz::files`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::files(data));
}

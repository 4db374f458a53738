//! AFL++ target `envelope`: see [`iapeer_fuzz::envelope`] for what it drives and checks.
fn main() {
    afl::fuzz!(|data: &[u8]| iapeer_fuzz::envelope(data));
}
